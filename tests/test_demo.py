"""The README's main job: the bundled example workspace with its session in an embedded SQLite
ledger, assembled the way `./dev demo` does it (on a copy, so the repository stays clean); and its
workspace and Nexus layers alone, in their designed order."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lamina_nexus.plugin as nexus
import pytest
from attrs import evolve
from lamina_workspace import plugin as workspace_plugin

from lamina import load_config
from lamina.reporting import report_document
from lamina.testing import make_assembler

ROOT = Path(__file__).resolve().parents[1]


def lamina(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LAMINA_PLUGINS"}
    return subprocess.run(
        [sys.executable, "-m", "lamina", *args], capture_output=True, text=True, env=env
    )


@pytest.fixture
def workspace(tmp_path):
    dest = tmp_path / "workspace"
    shutil.copytree(ROOT / "examples" / "workspace", dest, ignore=shutil.ignore_patterns("*.db*"))
    return dest


def test_dev_demo_runs_the_same_steps():
    script = (ROOT / "dev").read_text()
    demo = script.split("  demo)", 1)[1].split(";;", 1)[0]
    assert "ledger import examples/workspace/sessions/demo.jsonl --session demo" in demo
    assert "assemble --config examples/workspace/lamina.toml" in demo


def test_demo_assembles_workspace_ledger_history_and_working_set(workspace):
    config = str(workspace / "lamina.toml")
    imported = lamina(
        "ledger",
        "import",
        str(workspace / "sessions" / "demo.jsonl"),
        "--session",
        "demo",
        "--config",
        config,
    )
    assert imported.returncode == 0, imported.stderr
    assert (workspace / ".agent" / "ledger.db").is_file()

    out = lamina(
        "assemble",
        "--config",
        config,
        "--message",
        "Propose the smallest fix.",
        "--time",
        "2026-01-14T10:30:00+00:00",
        "--format",
        "json",
    )
    assert out.returncode == 0, out.stderr
    ctx = json.loads(out.stdout)
    assert "Never send email without showing the draft first." in ctx["system_prompt"]
    assert "## Nexus Environment" in ctx["system_prompt"]
    roles = [m["role"] for m in ctx["history"]]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    call = ctx["history"][1]["content"][-1]
    result = ctx["history"][2]["content"][0]
    assert call["type"] == "tool_call" and result["call_id"] == call["id"]
    current = ctx["current_message"]["content"][0]["text"]
    assert '<context path="config/staging.toml">' in current
    assert current.endswith("Propose the smallest fix.")
    budget = ctx["token_budget"]
    assert budget["used"]["total"] <= budget["available"]
    assert ctx["report"]["tokenizer"]["exact"] is True

    # The next turn's request repeats the same system prompt and history bytes: a cache hit.
    again = json.loads(
        lamina(
            "assemble",
            "--config",
            config,
            "--message",
            "And prod?",
            "--time",
            "2026-01-14T10:31:00+00:00",
            "--format",
            "json",
        ).stdout
    )
    assert again["system_prompt"] == ctx["system_prompt"]
    assert again["history"] == ctx["history"]
    assert again["report"]["stable_prefix"] == ctx["report"]["stable_prefix"]


def test_demo_report_format(workspace):
    config = str(workspace / "lamina.toml")
    lamina(
        "ledger",
        "import",
        str(workspace / "sessions" / "demo.jsonl"),
        "--session",
        "demo",
        "--config",
        config,
    )
    out = lamina("assemble", "--config", config, "--message", "hi", "--format", "report")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^    max: \d+$", out.stdout, re.M)
    assert "layer: session" in out.stdout and "layer: working_set" in out.stdout


def test_example_assembles_in_the_designed_order_with_its_report():
    """The workspace and Nexus layers alone, in the plugins' designed order."""
    # (The example's session history comes from the ledger plugin: the tests above.)
    config = load_config(ROOT / "examples" / "workspace" / "lamina.toml")
    config = evolve(config, sections={k: v for k, v in config.sections.items() if k != "ledger"})
    a = make_assembler(config, plugins=[("workspace", workspace_plugin), ("nexus", nexus)])
    with a:
        ctx = a.assemble(a.request("Where does the project keep its staging config?"))
    prompt = ctx.system_prompt
    headings = [line for line in prompt.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Boot",
        "## Workspace rules",
        "## User",
        "## Who you are",
        "## Your identity",
        "## Permissions and constraints",
        "## Nexus Environment",
        "## Runtime",
        "## Messaging",
    ]
    assert prompt.rstrip().endswith("</system>")  # the constitution, a role-system file
    text = ctx.current_message.content[0].text
    assert text.index('<developer path="current_task.md">') < text.index(
        '<context path="src/config_loader.py">'
    )
    assert "FAILED: configuration check failed" in text  # the log keeps its end
    doc = report_document(ctx)["assembly_report"]
    log = next(e for e in doc["included"] if e["path"] == "tool/terminal/log-latest.txt")
    assert log["truncated"] is True and log["strategy"] == "max_lines"
    assert log["original_tokens"] > 2 * log["tokens"]  # 123 lines before max_lines kept 40
    # the manifest's effective budget caps the working-set files, not the context
    assert doc["budget"]["max"] == ctx.token_budget.available > 8000
    files = [b for b in ctx.report.blocks if b.layer in ("working_set", "working_set_system")]
    assert sum(b.tokens for b in files) <= 8000
    assert ctx.report.warnings == ()

"""The README's main job: the bundled example workspace with its session in an embedded SQLite
ledger, assembled the way `./dev demo` does it (on a copy, so the repository stays clean)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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

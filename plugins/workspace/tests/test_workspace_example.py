"""The bundled example workspace (what ``./dev demo`` prints), and caching across turns."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from attrs import evolve
from lamina_workspace import plugin as workspace_plugin

from lamina import load_config
from lamina.reporting import report_document
from lamina.testing import make_assembler

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspace" / "lamina.toml"


def test_example_assembles_in_the_designed_order_with_its_report():
    import lamina_nexus.plugin as nexus

    # The example's session history comes from the ledger plugin; tests/test_demo.py covers
    # that part. Here: the workspace and Nexus layers alone.
    config = load_config(EXAMPLE)
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


def test_changing_context_files_leaves_the_cached_prefix_alone(
    workspace, assembler, config_for, write
):
    write(
        workspace,
        "working-set.yml",
        "files:\n  - path: rules.md\n    role: system\n  - path: log.txt\n    priority: 0.3\n",
    )
    write(workspace, "rules.md", "Stay calm.\n")
    log = write(workspace, "log.txt", "first run\n")
    a = assembler(config_for(workspace, working_set="working-set.yml"))
    t1 = a.assemble(a.request("one", time=datetime(2026, 1, 1, tzinfo=UTC)))
    log.write_text("second run, longer output\n", "utf-8")
    os.utime(log, ns=(0, log.stat().st_mtime_ns + 10**9))
    t2 = a.assemble(a.request("two", time=datetime(2026, 1, 2, tzinfo=UTC)))
    assert t1.system_prompt == t2.system_prompt
    assert t1.report.stable_prefix.sha256 == t2.report.stable_prefix.sha256
    assert "second run" in t2.current_message.content[0].text
    assert '<system path="rules.md">\nStay calm.\n</system>' in t1.system_prompt

"""The bundled example workspace: caching across turns (its layout with Nexus and its report:
``tests/test_demo.py``)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workspace" / "lamina.toml"


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

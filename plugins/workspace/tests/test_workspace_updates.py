"""Working-set updates: atomic, comment-preserving, logged; model- and orchestrator-initiated."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from lamina_workspace.orchestrator import (
    add_tool_output,
    bump_referenced,
    demote_unused,
    remove_old_tool_outputs,
)
from lamina_workspace.updates import UpdateError, apply_updates
from lamina_workspace.where import Workspace

NOW = datetime(2026, 1, 14, 10, 0, tzinfo=UTC)

MANIFEST = """\
# Our working set — keep it small.
protocol: CONTEXT-ASSEMBLY/0.1

files:
  # the rules, always
  - path: "rules.md"
    priority: 1.0          # highest
    role: "system"
    truncate_strategy: "never"

  - path: "src/main.py"
    priority: 0.8
    role: "context"
    truncate_strategy: "middle"   # code: keep both ends

metadata:
  last_updated: "2026-01-01T00:00:00Z"
  assembled_by: "user"
"""


@pytest.fixture
def ws(tmp_path: Path, write) -> Workspace:  # type: ignore[no-untyped-def]
    root = tmp_path / "ws"
    write(root, "working-set.yml", MANIFEST)
    write(root, "rules.md", "rules\n")
    write(root, "src/main.py", "print(1)\n")
    write(root, "docs/new.md", "notes\n")
    return Workspace(root=root, manifest="working-set.yml", log=".lamina/changes.jsonl")


def test_model_updates_preserve_comments_order_and_quoting(ws: Workspace):
    apply_updates(
        ws,
        [
            {"action": "adjust_priority", "path": "src/main.py", "priority": 0.9, "why": "hot"},
            {
                "action": "add_to_working_set",
                "path": "docs/new.md",
                "priority": 0.7,
                "why": "Found relevant documentation",
            },
        ],
        now=NOW,
    )
    assert (
        ws.manifest_path.read_text("utf-8")
        == """\
# Our working set — keep it small.
protocol: CONTEXT-ASSEMBLY/0.1

files:
  # the rules, always
  - path: "rules.md"
    priority: 1.0          # highest
    role: "system"
    truncate_strategy: "never"

  - path: "src/main.py"
    priority: 0.9
    role: "context"
    truncate_strategy: "middle"   # code: keep both ends

  - path: "docs/new.md"
    priority: 0.7
    role: "context"
    truncate_strategy: "end"
metadata:
  last_updated: "2026-01-14T10:00:00Z"
  assembled_by: "model"
"""
    )


def test_remove_keeps_the_other_entries_and_their_comments(ws: Workspace):
    apply_updates(
        ws,
        [{"action": "remove_from_working_set", "path": "src/main.py", "why": "task complete"}],
        now=NOW,
    )
    text = ws.manifest_path.read_text("utf-8")
    assert "src/main.py" not in text
    assert "# Our working set — keep it small.\n" in text
    assert "    priority: 1.0          # highest\n" in text
    assert "  # the rules, always\n" in text


def test_changes_are_appended_to_the_log(ws: Workspace):
    apply_updates(
        ws,
        [{"action": "adjust_priority", "path": "src/main.py", "priority": 0.5, "why": "less"}],
        now=NOW,
    )
    apply_updates(
        ws,
        [{"action": "remove_from_working_set", "path": "src/main.py", "why": "done"}],
        actor="orchestrator",
        now=NOW,
    )
    lines = [json.loads(x) for x in ws.log_path.read_text("utf-8").splitlines()]
    assert lines == [
        {
            "action": "adjust_priority",
            "actor": "model",
            "at": "2026-01-14T10:00:00Z",
            "path": "src/main.py",
            "previous_priority": 0.8,
            "priority": 0.5,
            "why": "less",
        },
        {
            "action": "remove_from_working_set",
            "actor": "orchestrator",
            "at": "2026-01-14T10:00:00Z",
            "path": "src/main.py",
            "previous_priority": 0.5,
            "why": "done",
        },
    ]


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (
            {"action": "adjust_priority", "path": "src/main.py", "priority": 0.5},
            "needs a non-empty why",
        ),
        (
            {"action": "adjust_priority", "path": "src/main.py", "priority": 0.5, "why": " "},
            "needs a non-empty why",
        ),
        ({"action": "adjust_priority", "path": "src/main.py", "why": "x"}, "needs a priority"),
        (
            {"action": "adjust_priority", "path": "src/main.py", "priority": 2, "why": "x"},
            "within 0.0..1.0",
        ),
        ({"action": "rename", "path": "a", "why": "x"}, "expected one of add_to_working_set"),
        (
            {"action": "remove_from_working_set", "path": "a", "why": "x", "priority": 1},
            "unknown keys",
        ),
        ({"action": "add_to_working_set", "path": "../etc/passwd", "why": "x"}, "'..' is refused"),
        (
            {"action": "add_to_working_set", "path": "/etc/passwd", "why": "x"},
            "absolute paths are refused",
        ),
        ({"action": "add_to_working_set", "path": "nope.md", "why": "x"}, "no such file"),
        (
            {"action": "add_to_working_set", "path": "src/main.py", "why": "x"},
            "already in the working set",
        ),
        (
            {"action": "remove_from_working_set", "path": "gone.md", "why": "x"},
            "not in the working set",
        ),
    ],
)
def test_bad_updates_are_refused_and_change_nothing(ws: Workspace, action, message):
    with pytest.raises(UpdateError, match=message.replace(".", r"\.").replace("(", r"\(")):
        apply_updates(ws, [action], now=NOW)
    assert ws.manifest_path.read_text("utf-8") == MANIFEST
    assert not ws.log_path.exists()


def test_binary_file_cannot_be_added(ws: Workspace, write):
    write(ws.root, "blob.bin", b"\x00\x01\x02")
    with pytest.raises(UpdateError, match="binary file"):
        apply_updates(ws, [{"action": "add_to_working_set", "path": "blob.bin", "why": "x"}])


def test_updates_are_all_or_nothing(ws: Workspace):
    with pytest.raises(UpdateError, match="not in the working set"):
        apply_updates(
            ws,
            [
                {"action": "adjust_priority", "path": "src/main.py", "priority": 0.1, "why": "a"},
                {"action": "remove_from_working_set", "path": "gone.md", "why": "b"},
            ],
        )
    assert ws.manifest_path.read_text("utf-8") == MANIFEST
    assert not ws.log_path.exists()


def test_concurrent_updates_all_land(ws: Workspace, write):
    for i in range(8):
        write(ws.root, f"tool/out{i}.txt", f"output {i}\n")

    def add(i: int) -> None:
        add_tool_output(ws, f"tool/out{i}.txt", why=f"run {i}")

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = ws.manifest_path.read_text("utf-8")
    assert all(f'"tool/out{i}.txt"' in text for i in range(8))
    assert len(ws.log_path.read_text("utf-8").splitlines()) == 8
    assert "# Our working set — keep it small." in text


def test_orchestrator_tool_outputs_added_then_old_ones_removed(ws: Workspace, write):
    for i in range(3):
        path = write(ws.root, f"tool/run{i}.log", f"run {i}\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
        add_tool_output(ws, f"tool/run{i}.log", now=NOW)
    text = ws.manifest_path.read_text("utf-8")
    assert (
        '  - path: "tool/run0.log"\n    priority: 0.3\n    role: "context"\n    truncate_strategy: "start"\n'
        in text
    )
    changes = remove_old_tool_outputs(ws, keep=1, now=NOW)
    assert [c.path for c in changes] == ["tool/run1.log", "tool/run0.log"]
    text = ws.manifest_path.read_text("utf-8")
    assert "tool/run2.log" in text and "tool/run1.log" not in text and "tool/run0.log" not in text


def test_orchestrator_bumps_referenced_and_demotes_unused(ws: Workspace, write):
    write(ws.root, "a.md", "a\n")
    apply_updates(
        ws, [{"action": "add_to_working_set", "path": "a.md", "priority": 0.5, "why": "x"}]
    )
    bumped = bump_referenced(ws, ["src/main.py", "rules.md", "unlisted.md"], by=0.15)
    assert [(c.path, c.priority) for c in bumped] == [("src/main.py", 0.95)]  # rules.md is at 1.0
    demoted = demote_unused(ws, {"src/main.py": 9, "a.md": 2}, turn=10, after_turns=5, by=0.2)
    # rules.md (system) is never demoted; src/main.py was used 1 turn ago.
    assert [(c.path, c.priority, c.why) for c in demoted] == [("a.md", 0.3, "not used for 8 turns")]


def test_cli_apply_and_check(ws: Workspace, tmp_path: Path):
    config = tmp_path / "lamina.toml"
    config.write_text(
        f'[plugins.workspace]\nroot = "{ws.root}"\nworking_set = "working-set.yml"\n'
        'change_log = ".lamina/changes.jsonl"\n',
        "utf-8",
    )
    from lamina_workspace.cli import working_set

    runner = CliRunner()
    updates = "action: adjust_priority\npath: src/main.py\npriority: 0.6\nwhy: cooling down\n"
    result = runner.invoke(working_set, ["apply", "-c", str(config)], input=updates)
    assert result.exit_code == 0, result.output
    assert result.output == "adjust_priority src/main.py: cooling down\n"
    result = runner.invoke(working_set, ["check", "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert "0.60 context   middle src/main.py" in result.output
    result = runner.invoke(
        working_set,
        ["apply", "-c", str(config)],
        input="action: adjust_priority\npath: src/main.py\npriority: 0.6\n",
    )
    assert result.exit_code == 2
    assert "needs a non-empty why" in result.output


def test_plugin_adds_the_working_set_command():
    import click
    from lamina_workspace.plugin import lamina_commands

    group = click.Group()
    lamina_commands(group)
    assert sorted(group.commands["working-set"].commands) == ["apply", "check", "log"]


def test_tool_calls_apply_updates_or_return_the_refusal(ws: Workspace):
    from lamina_workspace.tools import WORKING_SET_TOOLS, handle_tool_call

    assert [t.name for t in WORKING_SET_TOOLS] == [
        "add_to_working_set",
        "remove_from_working_set",
        "adjust_priority",
    ]
    assert all("why" in t.input_schema["required"] for t in WORKING_SET_TOOLS)
    text, error = handle_tool_call(
        ws, "add_to_working_set", {"path": "docs/new.md", "priority": 0.7, "why": "relevant"}
    )
    assert (text, error) == ("add_to_working_set docs/new.md: done", False)
    text, error = handle_tool_call(ws, "remove_from_working_set", {"path": "docs/new.md"})
    assert error and "needs a non-empty why" in text
    assert '"docs/new.md"' in ws.manifest_path.read_text("utf-8")
    assert json.loads(ws.log_path.read_text("utf-8"))["actor"] == "model"


def test_mentioned_paths_finds_whole_paths_only(ws: Workspace):
    from lamina_workspace.manifest import read_manifest
    from lamina_workspace.tools import mentioned_paths

    manifest = read_manifest(ws.root, ws.manifest)
    assert mentioned_paths(manifest, "The bug is in src/main.py, line 3.") == ["src/main.py"]
    assert mentioned_paths(manifest, "see lib/src/main.pyc and rules.md.bak") == []

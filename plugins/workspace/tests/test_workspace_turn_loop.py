"""The working set in the turn loop: its tools offered to the model when enabled, and the
orchestrator's rules run by assembly itself, once per turn, in any number of processes."""

from __future__ import annotations

import json
import multiprocessing
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lamina_workspace.manifest import read_manifest
from lamina_workspace.settings import OrchestratorSettings
from lamina_workspace.tools import WORKING_SET_TOOLS
from lamina_workspace.turn_loop import TurnLoop, tool_outputs
from lamina_workspace.where import Workspace

import lamina
from lamina import Block, LayerProvider, Message, TextPart

T0 = datetime(2026, 1, 14, 10, 0, tzinfo=UTC)
MANIFEST = """\
files:
  - path: "notes.md"
    priority: 0.5
  - path: "src/main.py"
    priority: 0.6
    truncate_strategy: "middle"
"""


@pytest.fixture
def root(workspace: Path, write) -> Path:  # type: ignore[no-untyped-def]
    write(workspace, "working-set.yml", MANIFEST)
    write(workspace, "notes.md", "notes\n")
    write(workspace, "src/main.py", "print(1)\n")
    return workspace


def priorities(root: Path) -> dict[str, float]:
    return {f.path: f.priority for f in read_manifest(root, "working-set.yml").files}


def log(root: Path) -> list[dict[str, Any]]:
    path = root / ".lamina" / "working-set.log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def output(root: Path, rel: str, text: str, age: int) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    os.utime(path, (1_700_000_000 + age, 1_700_000_000 + age))


def loop_config(config_for, root: Path, **orchestrator: Any):  # type: ignore[no-untyped-def]
    return config_for(
        root, working_set="working-set.yml", orchestrator={"enabled": True, **orchestrator}
    )


def turn(a, text: str, n: int, **fields: Any):  # type: ignore[no-untyped-def]
    return a.assemble(a.request(text, time=T0 + timedelta(minutes=n), **fields))


# -- tools ---------------------------------------------------------------------------------


def test_working_set_tools_are_offered_when_enabled(root, assembler, config_for):
    a = assembler(config_for(root, working_set="working-set.yml", tools=True))
    tools = a.assemble(a.request("go")).tools
    assert tools == WORKING_SET_TOOLS
    for tool in tools:  # each change needs a why
        assert "why" in tool.input_schema["required"]
    worker = a.assemble(a.request("go", role="worker", task="Fix src/main.py."))
    assert worker.tools == WORKING_SET_TOOLS  # anyone may manage their own attention
    off = assembler(config_for(root, working_set="working-set.yml"))
    assert off.assemble(off.request("go")).tools == ()


# -- the rules, run by assembly ------------------------------------------------------------


def test_tool_outputs_are_added_and_aged_out_turn_by_turn(root, assembler, config_for):
    output(root, "tool/run1.log", "run 1 ok\n", age=1)
    a = assembler(loop_config(config_for, root, keep_tool_outputs=1))
    first = turn(a, "start", 1)
    assert '<context path="tool/run1.log">\nrun 1 ok\n</context>' in first.current_message.text
    assert priorities(root)["tool/run1.log"] == 0.3
    output(root, "tool/sub/run2.log", "run 2 failed\n", age=2)
    second = turn(a, "again", 2).current_message.text
    assert "run 2 failed" in second and "run 1 ok" not in second
    assert "tool/run1.log" not in priorities(root)
    # an aged-out output is not added back while it is unchanged, but is once rewritten
    turn(a, "third", 3)
    assert "tool/run1.log" not in priorities(root)
    output(root, "tool/run1.log", "run 1 again\n", age=3)
    assert "run 1 again" in turn(a, "fourth", 4).current_message.text
    actions = [(e["actor"], e["action"], e["path"]) for e in log(root)]
    assert actions == [
        ("orchestrator", "add_to_working_set", "tool/run1.log"),
        ("orchestrator", "add_to_working_set", "tool/sub/run2.log"),
        ("orchestrator", "remove_from_working_set", "tool/run1.log"),
        ("orchestrator", "add_to_working_set", "tool/run1.log"),
        ("orchestrator", "remove_from_working_set", "tool/sub/run2.log"),
    ]


def test_referenced_files_are_bumped_and_unused_ones_demoted(root, assembler, config_for):
    a = assembler(loop_config(config_for, root, demote_after_turns=2, tool_outputs=None))
    turn(a, "Please look at src/main.py", 1)
    assert priorities(root) == {"notes.md": 0.5, "src/main.py": 0.7}
    turn(a, "and?", 2)
    assert priorities(root) == {"notes.md": 0.5, "src/main.py": 0.7}
    turn(a, "hm", 3)  # two turns unused: one step down each, then two more turns to wait
    assert priorities(root) == {"notes.md": 0.4, "src/main.py": 0.6}
    turn(a, "src/main.py again", 4)
    turn(a, "ok", 5)
    assert priorities(root) == {"notes.md": 0.3, "src/main.py": 0.7}
    whys = [e["why"] for e in log(root)]
    assert whys == [
        "referenced recently",
        "not used for 2 turns",
        "not used for 2 turns",
        "referenced recently",
        "not used for 2 turns",
    ]


def test_the_same_event_assembled_again_runs_the_rules_once(root, assembler, config_for):
    a = assembler(loop_config(config_for, root, tool_outputs=None))
    for _ in range(3):  # a retry, a compaction pass: the same turn
        turn(a, "look at notes.md", 1)
    assert priorities(root)["notes.md"] == 0.6
    assert len(log(root)) == 1


def test_a_reply_in_the_request_history_is_read_before_the_turn(root, assembler, config_for):
    a = assembler(loop_config(config_for, root, tool_outputs=None))
    history = (
        Message.of("user", "what now?"),
        Message.of("assistant", "I will check notes.md first."),
    )
    turn(a, "go on", 1, history=history)
    assert priorities(root)["notes.md"] == 0.6


def _ledger_like(reply: str) -> object:
    """A history plugin standing in for the ledger: one turn whose reply is ``reply``."""

    class Plugin:
        @lamina.hookimpl
        def lamina_layer_providers(self) -> list[LayerProvider]:
            def provide(ctx):  # type: ignore[no-untyped-def]
                for i, (role, text) in enumerate((("user", "hi"), ("assistant", reply))):
                    yield Block(
                        id=f"h{i}",
                        layer="session",
                        role=role,
                        content=(TextPart(text=text),),
                        group="t0",
                    )

            return [LayerProvider(name="stored-history", provide=provide, layers=("session",))]

    return Plugin()


def test_a_reply_from_stored_history_is_bumped_for_the_next_turn(root, assembler, config_for):
    extra = (("stored", _ledger_like("Edit src/main.py, then notes.md.")),)
    a = assembler(loop_config(config_for, root, tool_outputs=None), extra=extra)
    turn(a, "go on", 1)
    assert priorities(root) == {"notes.md": 0.6, "src/main.py": 0.7}
    turn(a, "go on", 1)  # the same turn again: nothing more
    assert priorities(root) == {"notes.md": 0.6, "src/main.py": 0.7}


def test_rules_that_cannot_apply_warn_and_the_turn_goes_on(root, assembler, config_for, write):
    write(root, "tool/image.png", b"\x89PNG\x00\x00")
    a = assembler(loop_config(config_for, root))
    ctx = turn(a, "go", 1)
    assert any("tool/image.png not added" in w and "binary" in w for w in ctx.report.warnings)
    assert "tool/image.png" not in priorities(root)


def test_tool_outputs_never_leave_the_root(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.log").write_text("secret\n")
    (root / "tool").symlink_to(outside)
    ws = Workspace(root=root, manifest="working-set.yml")
    from lamina_workspace.beneath import FileRefused

    with pytest.raises(FileRefused, match="outside the workspace root"):
        tool_outputs(ws, "tool")
    (root / "tool").unlink()
    (root / "tool").mkdir()
    (root / "tool" / "link.log").symlink_to(outside / "secret.log")
    assert tool_outputs(ws, "tool") == {}  # symlinks are not followed
    assert tool_outputs(ws, "missing") == {}


def test_a_bad_state_path_is_a_config_error(root, assembler, config_for):
    a = assembler(loop_config(config_for, root, state="../state.json"))
    with pytest.raises(lamina.ConfigError, match=r"orchestrator\.state"):
        turn(a, "go", 1)


# -- processes -------------------------------------------------------------------------------


def _turns(root: str, worker: int, count: int) -> None:
    ws = Workspace(root=Path(root), manifest="working-set.yml")
    loop = TurnLoop(ws, OrchestratorSettings(enabled=True, tool_outputs=None))
    for i in range(count):
        request = lamina.AssemblyRequest(
            session_label=f"s{worker}",
            event=lamina.Event(content=f"turn {i}: notes.md", time=T0),
            model="gpt-4o",
        )
        loop.before(request)


def test_turns_in_many_processes_all_count(root):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_turns, args=(str(root), w, 5)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    state = json.loads((root / ".lamina" / "working-set.state.json").read_text("utf-8"))
    assert state["turn"] == 20  # no turn lost to a concurrent write
    bumps = [e for e in log(root) if e["why"] == "referenced recently"]
    assert [e["priority"] for e in bumps] == [0.6, 0.7, 0.8, 0.9, 1.0]  # then at its ceiling

"""Task frames of the memory framework design: persisted in the store (a new service reads
them back), a blocked status, and a task-id filter on events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from lamina_memory.records import EpisodicEvent

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_frames_persist_in_the_store_with_their_status(make: Any, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/m.db"
    _asm, svc = make({"store": store})
    stack = svc.frames("s1")
    stack.push("Ship the release")
    stack.push("Fix the flaky test")
    stack.pop("pinned the clock")
    stack.push("Update the staging config")
    stack.block("waiting for the ops review")
    svc.close()

    asm2, svc2 = make({"store": store})  # a new process would do the same: read the store
    again = svc2.frames("s1")
    assert [f.goal for f in again.path()] == ["Ship the release", "Update the staging config"]
    assert again.peek() is not None and again.peek().status == "blocked"
    assert [f.goal for f in again.by_status("blocked")] == ["Update the staging config"]
    assert [f.result for f in again.by_status("complete")] == ["pinned the clock"]
    assert again.push("Ping ops").id == "t4"  # ids go on where they stopped
    text = asm2.assemble(asm2.request("what next?", session_label="s1")).current_message.text
    assert "Current task: Ping ops" in text
    again.pop("pinged")
    text = asm2.assemble(asm2.request("what next?", session_label="s1")).current_message.text
    assert "Current task: Update the staging config (blocked: waiting for the ops review)" in text
    again.unblock()
    assert svc2.frames("s1").peek().status == "active"  # type: ignore[union-attr]
    assert svc2.frames("other").path() == []  # per session


def test_unknown_status_and_empty_stack() -> None:
    from lamina_memory.frames import TaskStack

    stack = TaskStack()
    with pytest.raises(ValueError, match="unknown status 'stuck'"):
        stack.by_status("stuck")
    with pytest.raises(IndexError):
        stack.block()


def test_task_id_filter_keeps_that_tasks_events(make: Any) -> None:
    asm, svc = make()
    svc.add(
        [
            EpisodicEvent(
                id=f"e{i}",
                type="message",
                text=f"step {i} of {task}",
                time=NOW - timedelta(minutes=10 - i),
                session="default",
                task=task,
            )
            for i, task in enumerate(["t1", "t2", "t2", None])
        ]
    )
    meta = {"memory": {"task_id": "t2"}}
    text = asm.assemble(asm.request("what happened?", metadata=meta)).current_message.text
    assert "step 1 of t2" in text and "step 2 of t2" in text
    assert "step 0 of t1" not in text and "step 3 of None" not in text
    everything = asm.assemble(asm.request("what happened?")).current_message.text
    assert "step 0 of t1" in everything


def test_a_task_id_must_be_a_string(make: Any) -> None:
    from lamina_memory.filters import parse_filters

    from lamina import ConfigError

    _asm, svc = make()
    with pytest.raises(ConfigError, match="request.metadata.memory.task_id"):
        parse_filters(svc.settings, {"memory": {"task_id": 7}})

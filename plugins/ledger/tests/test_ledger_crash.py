"""A writer killed with SIGKILL in the middle of a transaction (an import, a compaction) leaves
the session as it was: consistent, readable, and writable again at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from lamina_ledger.importer import import_jsonl
from lamina_ledger.ledger import Ledger

from lamina import Message

WORKER = str(Path(__file__).with_name("ledger_worker.py"))


def kill_when_stalled(*args: str) -> None:
    """Run a worker until it says it stalled inside its transaction, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, WORKER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "stalled":
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the worker did not stall: {line!r} {err}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def transcript(path: Path, turns: int) -> Path:
    lines = [{"type": "session", "version": 3, "id": "crash", "cwd": "."}]
    parent = None
    for i in range(turns):
        for role, text in (("user", f"question {i}"), ("assistant", f"answer {i}")):
            entry = f"{role[0]}{i}"
            lines.append(
                {
                    "type": "message",
                    "id": entry,
                    "parentId": parent,
                    "message": {"role": role, "content": text},
                }
            )
            parent = entry
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def snapshot(ledger: Ledger, session: str) -> tuple[list[str], list[str]]:
    return ledger.ancestry(session), [t.id for t in ledger.history(session).turns]


def check_file(target: str) -> None:
    if not target.startswith("postgres"):
        with sqlite3.connect(target) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_killed_mid_import_writes_nothing(target: str, tmp_path: Path) -> None:
    with Ledger.open(target) as w:
        w.append_turn("other", [Message.of("user", "untouched")])
        before = snapshot(w, "other")
    src = transcript(tmp_path / "t.jsonl", 8)
    kill_when_stalled("stall-import", target, "imported", str(src))
    check_file(target)
    with Ledger.open(target) as w:
        assert w.sessions() == ["other"]
        assert snapshot(w, "other") == before
        assert w.db.one("SELECT count(*) FROM turns") == (1,)
        result = import_jsonl(w, src, "imported")  # the lock died with the writer
        assert result.turns == 8 and len(w.history("imported").turns) == 8


def test_killed_mid_compaction_leaves_the_history_as_it_was(target: str) -> None:
    with Ledger.open(target) as w:
        for i in range(8):
            w.append_turn("s", [Message.of("user", f"question {i} " * 10)])
        before = snapshot(w, "s")
    kill_when_stalled("stall-compact", target, "s")
    check_file(target)
    with Ledger.open(target) as w:
        assert snapshot(w, "s") == before
        assert w.db.one("SELECT count(*) FROM compactions") == (0,)
        late = w.append_turn("s", [Message.of("user", "after the crash")])
        assert w.ancestry("s") == [*before[0], late]

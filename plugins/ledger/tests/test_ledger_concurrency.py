"""Concurrent writers on SQLite and PostgreSQL, each a real process with its own connection:
no acknowledged turn is lost or duplicated, a compaction never drops a turn appended while it
was made, and a session created by several writers at once is created once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lamina_ledger.compaction import compact_history
from lamina_ledger.ledger import Ledger
from lamina_ledger.records import History
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import summarizer

from lamina import Message
from lamina.testing import FakeTokenizer

WORKER = str(Path(__file__).with_name("ledger_worker.py"))


def run_together(*commands: list[str]) -> list[list[str]]:
    """Start one worker process per command at once; each one's acknowledged ids."""
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, *c], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for c in commands
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        out.append(stdout.split())
    return out


def normal_turns(ledger: Ledger, session: str) -> list[str]:
    ids = ledger.ancestry(session)
    return [t for t in ids if ledger.turn(t).type == "normal"]


def expected_history(ledger: Ledger, session: str) -> list[str]:
    """The turns a history must hold: all normal turns from the latest compaction's first
    kept turn (or from the compaction itself) to the head."""
    ids = ledger.ancestry(session)
    kinds = {t: ledger.turn(t).type for t in ids}
    compactions = [i for i, t in enumerate(ids) if kinds[t] == "compaction"]
    if not compactions:
        return [t for t in ids if kinds[t] == "normal"]
    last = compactions[-1]
    first = ledger.compaction(ids[last]).first_kept_turn_id
    start = ids.index(first) if first is not None else last
    return [t for t in ids[start:] if kinds[t] == "normal"]


def test_concurrent_appends_lose_and_duplicate_nothing(target: str) -> None:
    with Ledger.open(target) as w:
        w.create_session("s")
    acked = run_together(*[["append", target, "s", f"w{n}", "50"] for n in range(4)])
    everyone = [t for ids in acked for t in ids]
    assert len(everyone) == 200
    with Ledger.open(target, readonly=True) as r:
        ancestry = r.ancestry("s")
        assert sorted(ancestry) == sorted(everyone)  # every acknowledged turn, once
        assert [t.id for t in r.history("s").turns] == ancestry
        for ids in acked:  # each writer's turns in the order it was told they landed
            assert [t for t in ancestry if t in set(ids)] == ids


def test_a_session_created_by_several_writers_at_once(target: str) -> None:
    Ledger.open(target).close()  # the schema exists: the race is on the session alone
    acked = run_together(*[["create", target, "new"] for _ in range(4)])
    with Ledger.open(target, readonly=True) as r:
        assert r.sessions() == ["new"]
        assert sorted(r.ancestry("new")) == sorted(t for ids in acked for t in ids)


def _fill(ledger: Ledger, n: int) -> None:
    for i in range(n):
        ledger.append_turn(
            "s",
            [
                Message.of("user", f"question {i} " * 20),
                Message.of("assistant", f"answer {i} " * 20),
            ],
        )


def _compact(ledger: Ledger, history: History, minimum_turns: int) -> str:
    result = compact_history(
        ledger,
        history,
        history_budget=100,
        settings=LedgerSettings(minimum_turns=minimum_turns),
        summarizer=summarizer(),
        tokenizer=FakeTokenizer(),
    )
    assert result is not None
    return result.turn_id


@pytest.mark.parametrize("minimum_turns", [0, 2], ids=["summarize-all", "keep-two"])
def test_a_turn_appended_while_compacting_stays_in_history(target: str, minimum_turns: int) -> None:
    with Ledger.open(target) as a, Ledger.open(target) as b:  # two connections, two writers
        _fill(a, 10)
        history = a.history("s")  # the compaction reads the history...
        late = b.append_turn("s", [Message.of("user", "LATE TURN"), Message.of("assistant", "ack")])
        compaction = _compact(a, history, minimum_turns)  # ...and is written after the append
        assert late in a.ancestry("s")
        kept = a.history("s")
        assert kept.compaction is not None and kept.compaction.turn_id == compaction
        assert late in [t.id for t in kept.turns]
        assert any("LATE TURN" in m.text for t in kept.turns for m in t.messages)
        assert [t.id for t in kept.turns] == expected_history(a, "s")


def test_a_compaction_after_the_head_moved_to_another_branch_is_made_again(target: str) -> None:
    with Ledger.open(target) as a, Ledger.open(target) as b:
        _fill(a, 6)
        first = a.ancestry("s")[0]
        history = a.history("s")
        branch = b.append_turn("s", [Message.of("user", "ON A BRANCH")], parent_turn_id=first)
        _compact(a, history, 0)  # its history's head is no longer an ancestor of the head
        kept = a.history("s")
        assert a.ancestry("s")[:2] == [first, branch]
        assert [t.id for t in kept.turns] == expected_history(a, "s")
        assert kept.compaction is not None
        assert branch in [t.id for t in kept.turns] or kept.compaction.first_kept_turn_id is None


def test_compactions_racing_appends_in_processes(target: str) -> None:
    with Ledger.open(target) as w:
        _fill(w, 4)
        before = w.ancestry("s")
    results = run_together(
        *[["append", target, "s", f"w{n}", "40"] for n in range(2)],
        ["compact", target, "s", "15"],
    )
    acked = [t for ids in results[:2] for t in ids]
    compactions = [t for t in results[2] if t != "nothing"]
    assert compactions, "the compactor found something to compact"
    with Ledger.open(target, readonly=True) as r:
        assert normal_turns(r, "s") == [*before, *[t for t in r.ancestry("s") if t in set(acked)]]
        assert sorted(normal_turns(r, "s")) == sorted([*before, *acked])
        assert set(compactions) <= set(r.ancestry("s"))
        assert [t.id for t in r.history("s").turns] == expected_history(r, "s")

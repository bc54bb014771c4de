"""The ledger as a state machine on SQLite and PostgreSQL: two writers (two connections)
append, compact (reading the history on one step and writing the compaction on a later one,
so appends land in between), assemble, read back and reopen in any order. Whatever the order,
no acknowledged turn is lost or duplicated and no tool result reaches history without its call."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from lamina_ledger.compaction import compact_history
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger
from lamina_ledger.records import History
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import summarizer

from lamina import Assembler, Message, ToolCallPart, ToolResultPart
from lamina.testing import FAKE_MODEL, FakeModel, FakeTokenizer, make_assembler
from lamina.testing.postgres import fresh_schema, server_dsn

WRITERS = st.integers(min_value=0, max_value=1)
KINDS = st.sampled_from(["text", "call", "result", "call+result"])


def orphans(messages: list[Message]) -> list[str]:
    """Tool results whose call does not come before them."""
    calls: set[str] = set()
    out = []
    for m in messages:
        for p in m.content:
            if isinstance(p, ToolCallPart):
                calls.add(p.id)
            elif isinstance(p, ToolResultPart) and p.call_id not in calls:
                out.append(p.call_id)
    return out


class LedgerMachine(RuleBasedStateMachine):
    kind = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="ledger-machine-"))
        self.target = (
            str(self.folder / "ledger.db") if self.kind == "sqlite" else fresh_schema(server_dsn())
        )
        self.writers = [Ledger.open(self.target), Ledger.open(self.target)]
        self.writers[0].create_session("s")
        self.acked: list[str] = []  # normal turns, in the order they were acknowledged
        self.open_calls: list[str] = []  # calls whose result has not been appended yet
        self.read: dict[int, History] = {}  # a compaction's history, read on an earlier step
        self.made = 0
        self.assembler: Assembler | None = None

    def teardown(self) -> None:
        for w in self.writers:
            w.close()
        if self.assembler is not None:
            self.assembler.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _messages(self, kind: str) -> list[Message]:
        self.made += 1
        n = self.made
        ask = Message.of("user", f"step {n}: please check file{n}.py " + "words " * (n % 7))
        if kind == "call":
            self.open_calls.append(f"c{n}")
            call = ToolCallPart(id=f"c{n}", name="read", arguments={"path": f"file{n}.py"})
            return [ask, Message(role="assistant", content=(call,))]
        if kind == "result" and self.open_calls:
            done = self.open_calls.pop(0)
            result = ToolResultPart(call_id=done, content=f"contents of {done} " * 5)
            return [Message(role="tool", content=(result,)), Message.of("assistant", "noted")]
        if kind == "call+result":
            call = ToolCallPart(id=f"c{n}", name="ls", arguments={})
            result = ToolResultPart(call_id=f"c{n}", content="a.py b.py")
            return [
                ask,
                Message(role="assistant", content=(call,)),
                Message(role="tool", content=(result,)),
            ]
        return [ask, Message.of("assistant", f"answer {n}")]

    def _compact(self, writer: int, history: History, budget: int, minimum: int) -> None:
        compact_history(
            self.writers[writer],
            history,
            history_budget=budget,
            settings=LedgerSettings(minimum_turns=minimum),
            summarizer=summarizer(),
            tokenizer=FakeTokenizer(),
        )

    @rule(writer=WRITERS, kind=KINDS)
    def append(self, writer: int, kind: str) -> None:
        self.acked.append(self.writers[writer].append_turn("s", self._messages(kind)))

    @rule(writer=WRITERS)
    def append_an_orphan_result(self, writer: int) -> None:
        """A tool result with no call anywhere is refused, and nothing is written."""
        before = self.writers[writer].head("s")
        orphan = ToolResultPart(call_id="nobody-called", content="?")
        with pytest.raises(LedgerError, match="has no tool call before it"):
            self.writers[writer].append_turn("s", [Message(role="tool", content=(orphan,))])
        assert self.writers[writer].head("s") == before

    @precondition(lambda self: self.acked)
    @rule(writer=WRITERS)
    def read_for_compaction(self, writer: int) -> None:
        self.read[writer] = self.writers[writer].history("s")

    @precondition(lambda self: self.read)
    @rule(
        writer=WRITERS,
        budget=st.integers(min_value=0, max_value=300),
        minimum=st.integers(min_value=0, max_value=2),
    )
    def write_compaction(self, writer: int, budget: int, minimum: int) -> None:
        """Write a compaction from a history read on an earlier step (turns may have landed
        since, from either writer)."""
        history = self.read.pop(writer, None) or self.read.pop(1 - writer)
        self._compact(writer, history, budget, minimum)

    @precondition(lambda self: self.acked)
    @rule(
        writer=WRITERS,
        other=WRITERS,
        kinds=st.lists(KINDS, min_size=1, max_size=3),
        budget=st.integers(min_value=0, max_value=300),
        minimum=st.integers(min_value=0, max_value=2),
    )
    def compact_while_appending(
        self, writer: int, other: int, kinds: list[str], budget: int, minimum: int
    ) -> None:
        """The race at its most likely: the compaction reads, turns land, it writes."""
        history = self.writers[writer].history("s")
        for kind in kinds:
            self.append(other, kind)
        self._compact(writer, history, budget, minimum)

    @precondition(lambda self: self.acked)
    @rule(writer=WRITERS, budget=st.integers(min_value=0, max_value=300))
    def compact_now(self, writer: int, budget: int) -> None:
        self._compact(writer, self.writers[writer].history("s"), budget, 1)

    @rule(writer=WRITERS)
    def reopen(self, writer: int) -> None:
        self.writers[writer].close()
        self.writers[writer] = Ledger.open(self.target)

    @rule()
    def assemble(self) -> None:
        """The kernel gets the ledger's history whole: summary, kept turns, tool pairs."""
        if self.assembler is None:
            config = {
                "model": FAKE_MODEL,
                "session": "s",
                "budget": {"max_tokens": 1_000_000, "reserve_response": 0},
                "plugins": {"ledger": {"database": self.target}},
            }
            self.assembler = make_assembler(
                config, plugins=[("ledger", plugin), ("fake", FakeModel(context_window=2_000_000))]
            )
        ctx = self.assembler.assemble(self.assembler.request("next"))
        history = self.writers[0].history("s")
        expected = [m for t in history.turns for m in t.messages]
        got = list(ctx.history[1:] if history.compaction is not None else ctx.history)
        assert [m.content for m in got] == [m.content for m in expected]
        assert orphans(got) == []

    @invariant()
    def nothing_acknowledged_is_lost_or_duplicated(self) -> None:
        reader = self.writers[self.made % 2]
        ancestry = reader.ancestry("s")
        normal = [t for t in ancestry if reader.turn(t).type == "normal"]
        assert normal == self.acked  # each acknowledged turn once, in order
        history = reader.history("s")
        ids = [t.id for t in history.turns]
        # the history is the newest turns, without a gap ...
        assert ids == self.acked[len(self.acked) - len(ids) :]
        # ... holding at least everything the latest compaction kept or came before
        compactions = [t for t in ancestry if t not in set(normal)]
        if compactions:
            latest = reader.compaction(compactions[-1])
            first = latest.first_kept_turn_id
            after = ancestry.index(first) if first is not None else ancestry.index(latest.turn_id)
            assert set(normal) & set(ancestry[after:]) <= set(ids)
        else:
            assert ids == self.acked
        assert orphans([m for t in history.turns for m in t.messages]) == []


MACHINE_SETTINGS = settings(
    max_examples=12,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class SqliteMachine(LedgerMachine):
    kind = "sqlite"


class PostgresMachine(LedgerMachine):
    kind = "postgres"


@pytest.mark.parametrize("machine", [SqliteMachine, PostgresMachine], ids=["sqlite", "postgres"])
def test_ledger_state_machine(machine: Any, postgres_dsn: str) -> None:
    run_state_machine_as_test(machine, settings=MACHINE_SETTINGS)

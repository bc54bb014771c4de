"""When the ledger compacts: by default when the history would not fit whole; with
``compact_when``, once history takes more than that share of the available tokens. Tool
results the kernel capped or stubbed (``[tool_results]``) are not cuts: they neither end the
session nor make it compact every turn, and the ledger keeps them whole."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from lamina_ledger.locks import SessionLocks
from lamina_ledger.session import LedgerSession

from lamina import (
    AssembledContext,
    Assembler,
    Message,
    SerdeError,
    ToolCallPart,
    ToolResultPart,
)
from lamina.testing import make_assembler
from lamina.testing.history import words


def assembler(
    db: str, budget: int, tool_results: dict[str, Any] | None = None, **ledger: Any
) -> Assembler:
    cfg: dict[str, Any] = {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": db, **ledger}},
    }
    if tool_results is not None:
        cfg["tool_results"] = tool_results
    return make_assembler(cfg, plugins=[("ledger", plugin)])


def run(
    s: LedgerSession, turns: Callable[[int], list[Message]], n: int, label: str = "s"
) -> list[AssembledContext]:
    a = s.assembler
    out = []
    for i in range(n):
        req = a.request(f"question {i}", session_label=label)
        ctx = s.assemble(req)
        out.append(ctx)
        s.record_turn(req, turns(i))
    return out


def test_compact_when_compacts_once_history_takes_that_share(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    def turns(i: int) -> list[Message]:
        return exchange(i, "lorem ipsum ", size=40)

    default = assembler(str(tmp_path / "a.db"), 4000)
    with LedgerSession(default) as s:
        s.start("s")
        plain = run(s, turns, 40)
        plain_compactions = len(s.compactions)
    early = assembler(str(tmp_path / "b.db"), 4000, compact_when=0.7)
    with LedgerSession(early) as s:
        s.start("s")
        contexts = run(s, turns, 40)
        assert len(s.compactions) > plain_compactions >= 1
        assert all(c.trigger == "context_limit" for c in s.compactions)
    for ctx in contexts:
        budget = ctx.token_budget
        assert budget.used.history <= 0.7 * budget.available
    # By default history grows until it would not fit: well past 70% of the budget.
    assert max(c.token_budget.used.history / c.token_budget.available for c in plain) > 0.8


def test_compact_when_runs_the_kernel_once_per_request(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    a = assembler(str(tmp_path / "l.db"), 3000, compact_when=0.7)
    runs: list[int] = []
    pipeline = a.run
    a.run = lambda *args, **kw: runs.append(1) or pipeline(*args, **kw)  # type: ignore[method-assign]
    with LedgerSession(a) as s:
        s.start("s")
        per_request = []
        for i in range(30):
            req = a.request(f"question {i}")
            before = len(runs)
            s.assemble(req)
            per_request.append(len(runs) - before)
            s.record_turn(req, exchange(i, "lorem ipsum ", size=40))
        assert len(s.compactions) >= 2
    assert all(n == 1 for n in per_request[1:]), per_request


@pytest.mark.parametrize(
    ("ledger", "says"),
    [
        ({"compact_when": 0.4}, r"compact_when \(0.4\) must exceed compact_target \(0.5\)"),
        ({"compact_when": 0.5}, "must exceed compact_target"),
        ({"compact_when": 1.5}, r"compact_when must be > 0 and <= 1, got 1.5"),
        ({"compact_when": 0}, "compact_when must be > 0"),
        ({"compact_when": "soon"}, "compact_when"),
    ],
)
def test_bad_triggers_are_config_errors_naming_the_plugin(
    tmp_path: Path, ledger: dict[str, Any], says: str
) -> None:
    with pytest.raises(SerdeError, match=says) as raised:
        assembler(str(tmp_path / "l.db"), 4000, **ledger)
    assert "plugins.ledger" in str(raised.value) or "'ledger'" in str(raised.value)


def test_compact_when_one_is_allowed_and_acts_like_the_default(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    def turns(i: int) -> list[Message]:
        return exchange(i, "lorem ipsum ", size=40)

    found = []
    for name, ledger in (("a", {}), ("b", {"compact_when": 1.0})):
        a = assembler(str(tmp_path / f"{name}.db"), 3000, **ledger)
        with LedgerSession(a) as s:
            s.start("s")
            run(s, turns, 30)
            found.append([c.summarized_turns for c in s.compactions])
    assert found[0] and found[0] == found[1]


# -- tool results the kernel edits ---------------------------------------------------------

HUGE = words(40_000)  # about 52,000 o200k tokens


def test_a_huge_tool_result_assembles_through_the_ledger_session(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    a = assembler(str(tmp_path / "l.db"), 20_000)
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(5):
            s.record_turn(a.request(f"hi {i}"), exchange(10 + i))
        s.record_turn(a.request("read it"), exchange(1, HUGE))
        contexts = [s.assemble(a.request(f"what did it say? {i}")) for i in range(3)]
        for i, ctx in enumerate(contexts):
            assert ctx.token_budget.used.total <= 20_000
            [capped] = [b for b in ctx.report.blocks if b.strategy == "tool_result_cap"]
            assert capped.original_tokens > 50_000
            if i:
                s.record_turn(a.request(f"more {i}"), exchange(20 + i))
        # Capping is not a cut: the session does not compact to make room for it.
        assert s.compactions == []
        [kept] = [
            p.content
            for t in s.ledger.history("s").turns
            for m in t.messages
            for p in m.content
            if isinstance(p, ToolResultPart) and p.call_id == "call1"
        ]
        assert kept == HUGE  # the ledger keeps the full result


def test_a_huge_result_arriving_mid_session_does_not_make_it_compact(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    """The ledger counts the whole result (52,000 tokens, more than the budget); the kernel
    caps it, and the capped history fits: no compaction (the kernel is asked first)."""
    a = assembler(str(tmp_path / "l.db"), 20_000)
    with LedgerSession(a) as s:
        s.start("s")
        run(s, lambda i: exchange(i, "lorem ipsum ", size=20), 6)
        s.record_turn(a.request("read it"), exchange(50, HUGE))
        ctx = s.assemble(a.request("what did it say?"))
        assert s.compactions == []
        assert [b.strategy for b in ctx.report.blocks if b.strategy] == ["tool_result_cap"]
        assert ctx.token_budget.used.total <= 20_000


def test_a_huge_tool_call_neither_stops_the_session_nor_makes_it_compact(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    """An agent writes a whole file through a call (52,000 tokens of arguments, more than
    the budget): every next request is capped and fits, with no compaction; the ledger keeps
    the whole call. (It was a ``BudgetError`` until the turn left the protected ones.)"""
    a = assembler(str(tmp_path / "l.db"), 20_000)
    with LedgerSession(a) as s:
        s.start("s")
        run(s, lambda i: exchange(i, "lorem ipsum ", size=20), 6)
        call = ToolCallPart(id="w1", name="write_file", arguments={"path": "a.md", "text": HUGE})
        written = [
            Message.of("user", "write it"),
            Message(role="assistant", content=(call,)),
            Message(role="tool", content=(ToolResultPart(call_id="w1", content="written"),)),
        ]
        s.record_turn(a.request("write it"), written)
        for i in range(3):
            ctx = s.assemble(a.request(f"and now? {i}"))
            assert [b.strategy for b in ctx.report.blocks if b.strategy] == ["tool_call_cap"]
            assert ctx.token_budget.used.total <= 20_000
            s.record_turn(a.request(f"and now? {i}"), exchange(60 + i))
        assert s.compactions == []
        [kept] = [
            p
            for t in s.ledger.history("s").turns
            for m in t.messages
            for p in m.content
            if isinstance(p, ToolCallPart) and p.id == "w1"
        ]
        assert kept.arguments["text"] == HUGE  # the ledger keeps the whole call


def test_a_session_with_a_capped_result_still_compacts_before_history_is_cut(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    """Once the kernel capped a result the ledger asks the kernel whether history fits; a
    cut it reports only in sum (``report.dropped``, not verbose) still calls for compaction."""
    a = assembler(str(tmp_path / "l.db"), 6000)
    with LedgerSession(a) as s:
        s.start("s")
        s.record_turn(a.request("read it"), exchange(0, words(4000)))
        contexts = run(s, lambda i: exchange(i + 1, "lorem ipsum ", size=60), 40)
        assert s.compactions
    for ctx in contexts:
        assert not [d for d in ctx.report.dropped if d.layer == "session"], ctx.report.dropped
        assert ctx.token_budget.used.total <= 6000


def test_stubbed_results_through_the_ledger_session(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    def turns(i: int) -> list[Message]:
        return exchange(i, "lorem ipsum ", size=120)

    plain = assembler(str(tmp_path / "a.db"), 6000)
    with LedgerSession(plain) as s:
        s.start("s")
        run(s, turns, 30)
        without = len(s.compactions)
    a = assembler(str(tmp_path / "b.db"), 6000, tool_results={"stub_after": 3})
    with LedgerSession(a) as s:
        s.start("s")
        contexts = run(s, turns, 30)
        # Stubs keep the history small: fewer compactions, none made only for stubs.
        assert len(s.compactions) < without
        last = contexts[-1]
        stubbed = [b for b in last.report.blocks if b.strategy == "tool_result_stub"]
        assert stubbed and all("read result of call" in (b.reason or "") for b in stubbed)
        texts = [
            p.content for m in last.history for p in m.content if isinstance(p, ToolResultPart)
        ]
        assert sum(t.startswith("[read result cleared") for t in texts) == len(stubbed)
        # The ledger keeps every result whole.
        results = [
            p.content
            for t in s.ledger.history("s").turns
            for m in t.messages
            for p in m.content
            if isinstance(p, ToolResultPart)
        ]
        assert results and all(r == "lorem ipsum " * 120 for r in results)
    for ctx in contexts:
        assert ctx.token_budget.used.total <= 6000


# -- one lock per session label, while it is used ------------------------------------------


def test_session_locks_are_dropped_when_nobody_holds_or_waits(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    a = assembler(str(tmp_path / "l.db"), 8000)
    with LedgerSession(a) as s:
        for n in range(50):
            label = f"user-{n}"
            s.start(label)
            run(s, lambda i: exchange(i), 1, label=label)
            s.compact(a.request("x", session_label=label))
        assert len(s._locks) == 0


def test_a_label_s_lock_still_makes_its_calls_take_turns() -> None:
    locks = SessionLocks()
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first() -> None:
        with locks.hold("a"):
            order.append("first in")
            inside.set()
            release.wait(5)
            order.append("first out")

    def second() -> None:
        inside.wait(5)
        with locks.hold("a"):
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    inside.wait(5)
    with locks.hold("b"):  # another label is not held up
        order.append("other label")
    for _ in range(500):  # the second call is waiting for "a": its lock is kept
        if len(locks) == 1 and locks._entries["a"].users == 2:
            break
        threading.Event().wait(0.01)
    assert locks._entries["a"].users == 2
    release.set()
    for t in threads:
        t.join(5)
    assert order == ["first in", "other label", "first out", "second in"]
    assert len(locks) == 0

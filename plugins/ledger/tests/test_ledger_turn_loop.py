"""The turn loop's work, counted: a request that compacts runs the kernel once, and
``record_turn`` tokenizes only what nobody counted before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
from lamina_ledger.session import LedgerSession

from lamina import Assembler, Message, hookimpl
from lamina.testing import FakeTokenizer, make_assembler


class Counting(FakeTokenizer):
    """The fake tokenizer, recording every text it is asked to count."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return super().count(text)


class CountingPlugin:
    def __init__(self) -> None:
        self.tokenizer = Counting()

    @hookimpl
    def lamina_tokenizer(self, model: str) -> Counting:
        return self.tokenizer


def assembler(db: str, budget: int, tokens: CountingPlugin) -> Assembler:
    cfg = {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": db}},
    }
    return make_assembler(cfg, plugins=[("ledger", plugin), ("counting", tokens)])


def kernel_runs(a: Assembler) -> list[int]:
    """Count the kernel's pipeline runs of ``a``."""
    runs: list[int] = []
    pipeline = a.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return pipeline(*args, **kwargs)

    a.run = counted  # type: ignore[method-assign]
    return runs


def test_a_request_that_compacts_runs_the_kernel_once(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    a = assembler(str(tmp_path / "l.db"), 3000, CountingPlugin())
    runs = kernel_runs(a)
    per_request: list[tuple[int, bool]] = []
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(30):
            req = a.request(f"question {i}")
            before, compactions = len(runs), len(s.compactions)
            ctx = s.assemble(req)
            per_request.append((len(runs) - before, len(s.compactions) > compactions))
            assert ctx.token_budget.used.total <= 3000
            s.record_turn(req, exchange(i, "lorem ipsum ", size=40))
    compacting = [n for n, compacted in per_request[1:] if compacted]
    assert len(compacting) >= 2, "the session outgrew its budget several times"
    assert all(n == 1 for n, _ in per_request[1:]), per_request


def test_record_turn_tokenizes_only_what_nobody_counted(tmp_path: Path) -> None:
    tokens = CountingPlugin()
    a = assembler(str(tmp_path / "l.db"), 100_000, tokens)
    with LedgerSession(a) as s:
        s.start("s")
        req = a.request("what is in src/app.py?")
        s.assemble(req)
        seen = tokens.tokenizer.texts
        seen.clear()
        user = Message.of("user", "what is in src/app.py?")
        reply = Message.of("assistant", "a small web app")
        first = s.record_turn(req, [user, reply])
        assert seen == ["a small web app"], "the current message was counted by assembly"
        seen.clear()
        again = s.record_turn(req, [user, reply])  # a host retrying: nothing counted again
        assert seen == []
        s.record_turn(req, [Message.of("assistant", "given")], message_tokens=[7])
        assert seen == []
        assert s.ledger.turn(first).message_tokens == s.ledger.turn(again).message_tokens
        assert s.ledger.turn(s.ledger.head("s") or "").message_tokens == (7,)

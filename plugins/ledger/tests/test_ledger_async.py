"""``LedgerSession`` from asyncio and from threads: concurrent tasks over several sessions give
what serial runs give, and turns recorded concurrently into one session are all there."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
from lamina_ledger.session import LedgerSession

from lamina import Message
from lamina.testing import make_assembler

SESSIONS = 4
TURNS = 12


def config(database: str) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": 2500, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": database}},
    }


def seen(ctx: Any) -> tuple[Any, ...]:
    """What a context holds that does not depend on the clock."""
    return (tuple((m.role, m.text) for m in ctx.history), ctx.token_budget.used.history)


async def agent(
    s: LedgerSession, label: str, exchange: Callable[..., list[Message]]
) -> list[tuple[Any, ...]]:
    a, out = s.assembler, []
    for i in range(TURNS):
        req = a.request(f"{label} question {i}", session_label=label)
        out.append(seen(await s.aassemble(req)))
        await s.arecord_turn(req, exchange(i, f"{label} says ", size=80))
    return out


def run_all(db: str, exchange: Callable[..., list[Message]], concurrent: bool) -> Any:
    a = make_assembler(config(db), plugins=[("ledger", plugin)])
    labels = [f"session-{k}" for k in range(SESSIONS)]

    async def main() -> list[list[tuple[Any, ...]]]:
        if concurrent:
            return list(await asyncio.gather(*(agent(s, label, exchange) for label in labels)))
        return [await agent(s, label, exchange) for label in labels]

    with a, LedgerSession(a) as s:
        for label in labels:
            s.start(label)
        contexts = asyncio.run(main())
        histories = [
            [m.text for t in s.ledger.history(label).turns for m in t.messages] for label in labels
        ]
        compactions = sorted((c.trigger, c.summarized_turns) for c in s.compactions)
        turns = [s.ledger.stats(label).turns for label in labels]
    return contexts, histories, compactions, turns


def test_concurrent_tasks_give_what_serial_runs_give(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    serial = run_all(str(tmp_path / "serial.db"), exchange, concurrent=False)
    together = run_all(str(tmp_path / "together.db"), exchange, concurrent=True)
    assert serial[1:] == together[1:] and serial[0] == together[0]
    assert serial[3] == [TURNS] * SESSIONS and serial[2], "each session compacted"


def test_turns_recorded_concurrently_into_one_session_are_all_there(target: str) -> None:
    a = make_assembler(config(target), plugins=[("ledger", plugin)])
    with a, LedgerSession(a) as s:
        s.start("s")

        async def record(i: int) -> str:
            req = a.request(f"q{i}")
            await s.aassemble(req)
            return await s.arecord_turn(req, [Message.of("user", f"q{i}")])

        async def main() -> list[str]:
            return list(await asyncio.gather(*(record(i) for i in range(40))))

        ids = asyncio.run(main())
        with ThreadPoolExecutor(8) as pool:  # and from plain threads
            more = list(
                pool.map(
                    lambda i: s.record_turn(a.request("t"), [Message.of("user", f"t{i}")]),
                    range(40),
                )
            )
        ancestry = s.ledger.ancestry("s")
        assert sorted(ancestry) == sorted(ids + more)
        texts = {m.text for t in s.ledger.history("s").turns for m in t.messages}
        assert texts == {f"q{i}" for i in range(40)} | {f"t{i}" for i in range(40)}
        assert len(s.assembler.assemble(a.request("now")).history) == 80


def test_compaction_from_a_task(tmp_path: Path, exchange: Callable[..., list[Message]]) -> None:
    a = make_assembler(config(str(tmp_path / "l.db")), plugins=[("ledger", plugin)])
    with a, LedgerSession(a) as s:
        s.start("s")
        for i in range(6):
            s.record_turn(a.request(f"q{i}"), exchange(i))
        result = asyncio.run(s.acompact(a.request("now"), share=0.2))
        assert result is not None and s.ledger.history("s").compaction is not None

"""One huge tool result in a ledger session: what every later request costs with it, against
the same session without it, in one run.

Two ledger sessions (SQLite, in a temp dir) of ``--turns`` turns, each turn a user message,
a tool call, its result and a reply, at a 16k budget; they differ in one result only: the
third turn's is ``--megabytes`` of a log (numbered lines) instead of one line. The result is
over its cap (``[tool_results]``, a quarter of the budget), so every request cuts it to its
head and tail. Printed per model (gpt-4o, counted exactly with o200k_base; claude-sonnet-4,
an estimate): the request that first caps it, the ``record_turn`` that stores it, and the
median of the ``--requests`` requests after the last turn (``gc.collect()`` before each, the
two sessions alternating) with and without it, and their ratio: what one big result costs a
session on every request after the first (1.0x: nothing).

Run: ``.venv/bin/python bench/bench_big_result.py [--megabytes 3] [--turns 12] [--requests 30]``
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

import lamina_ledger.plugin as ledger_plugin
from lamina_ledger.session import LedgerSession

from lamina import AssemblyRequest, Message, ToolCallPart, ToolResultPart
from lamina.testing import make_assembler

MODELS = ("gpt-4o", "claude-sonnet-4")
BIG_TURN = 3


def log(megabytes: float) -> str:
    lines, size, n = [], 0, 0
    while size < megabytes * 1_000_000:
        line = f"2026-11-26T12:{n // 60 % 60:02d}:{n % 60:02d} worker-{n % 7} handled request {n}\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines)


def turn(i: int, current: Message, result: str) -> list[Message]:
    call = f"call{i}"
    return [
        current,
        Message(role="assistant", content=(ToolCallPart(id=call, name="read_log", arguments={}),)),
        Message(role="tool", content=(ToolResultPart(call_id=call, content=result),)),
        Message.of("assistant", f"Turn {i}: read it."),
    ]


class Session:
    """One ledger session of the run; ``big``: the result of turn ``BIG_TURN`` is ``big``."""

    def __init__(self, model: str, folder: str, big: str | None) -> None:
        cfg = {
            "model": model,
            "session": "s",
            "budget": {"max_tokens": 16_000},
            "plugins": {"ledger": {"database": f"{folder}/ledger.db"}},
        }
        self.assembler = make_assembler(cfg, plugins=[("ledger", ledger_plugin)])
        self.session = LedgerSession(self.assembler)
        self.session.start("s")
        self.big = big
        self.turns = 0
        self.first_cap_ms = self.record_ms = 0.0

    def request(self) -> AssemblyRequest:
        return self.assembler.request(f"Question {self.turns}: what does the log say now?")

    def step(self) -> None:
        """Assemble and record one turn (timing the ones that store and first cap the big
        result)."""
        req = self.request()
        started = time.perf_counter()
        ctx = self.session.assemble(req)
        if self.turns == BIG_TURN + 1:
            self.first_cap_ms = 1000 * (time.perf_counter() - started)
        big = self.big is not None and self.turns == BIG_TURN
        result = self.big if big and self.big is not None else f"line {self.turns}"
        started = time.perf_counter()
        self.session.record_turn(req, turn(self.turns, ctx.current_message, result))
        if big:
            self.record_ms = 1000 * (time.perf_counter() - started)
        self.turns += 1

    def timed(self) -> float:
        req = self.request()
        gc.collect()
        started = time.perf_counter()
        self.session.assemble(req)
        return 1000 * (time.perf_counter() - started)

    def close(self) -> None:
        self.session.close()
        self.assembler.close()


def run(model: str, text: str, turns: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as with_dir, tempfile.TemporaryDirectory() as without:
        sessions = (Session(model, with_dir, text), Session(model, without, None))
        try:
            for _ in range(turns):
                for s in sessions:
                    s.step()
            times: tuple[list[float], list[float]] = ([], [])
            for i in range(requests):
                for side in (0, 1) if i % 2 else (1, 0):
                    times[side].append(sessions[side].timed())
        finally:
            for s in sessions:
                s.close()
    big, plain = (statistics.median(t) for t in times)
    first = sessions[0]
    print(
        f"  {model}: recording the big turn {first.record_ms:.0f} ms, the request that first "
        f"caps it {first.first_cap_ms:.0f} ms; every request after: {big:.2f} ms with it, "
        f"{plain:.2f} ms without, {big / plain:.2f}x",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=3.0, help="size of the big result")
    parser.add_argument("--turns", type=int, default=12, help="turns before timing")
    parser.add_argument("--requests", type=int, default=30, help="requests timed per session")
    args = parser.parse_args(argv)
    if args.turns <= BIG_TURN + 1:
        parser.error(
            f"--turns must be over {BIG_TURN + 1}: the big result comes at turn {BIG_TURN}"
        )
    text = log(args.megabytes)
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print(
        f"One {len(text) / 1e6:.1f} MB tool result in a ledger session at 16k (median ms per "
        f"request after {args.turns} turns, {args.requests} requests, gc.collect() before each)"
    )
    for model in MODELS:
        run(model, text, args.turns, args.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

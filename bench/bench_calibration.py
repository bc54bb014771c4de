"""An estimating tokenizer calibrated from reported usage, turn after turn: what a ledger
request costs when the host reports each turn's usage (as ``lamina serve`` does with every
recorded turn), against the same session without reports, in one run.

Two ledger sessions (SQLite, temp dirs) on ``claude-sonnet-4`` (the Anthropic plugin's
calibrated estimate, 3.5 characters a token) at a 100k budget, ``--turns`` turns of a question
and an answer. After each turn one session's tokenizer is told what the provider counted: the
estimate at factor 1 times ``--ratio``, give or take ``--noise`` (uniform, seeded): a session's
requests share most of their text, so the provider's count against the estimate moves little
from one to the next. Each change of the factor makes the kernel forget its counts and
assemble the next request cold. Timed: each session's ``LedgerSession.assemble`` over the last
``--last`` turns, ``gc.collect()`` before each; medians, their ratio, and how often the factor
changed.

Run: ``.venv/bin/python bench/bench_calibration.py [--turns 300] [--noise 0.02] [--ratio 1.13]``
"""

from __future__ import annotations

import argparse
import gc
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

import lamina_anthropic
import lamina_ledger.plugin as ledger_plugin
from lamina_ledger.session import LedgerSession

from lamina import Message
from lamina.testing import make_assembler

MODEL = "claude-sonnet-4"


def session(turns: int, last: int, ratio: float, noise: float | None) -> tuple[float, int]:
    """Median ms per request over the last ``last`` turns, and how often the factor changed
    (``noise`` ``None``: no usage reported)."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "model": MODEL,
            "session": "s",
            "budget": {"max_tokens": 100_000},
            "plugins": {"ledger": {"database": f"{tmp}/ledger.db"}},
        }
        plugins = [("ledger", ledger_plugin), ("anthropic", lamina_anthropic.plugin)]
        a = make_assembler(cfg, plugins=plugins)
        tok = a.model(MODEL).tokenizer
        times = []
        with a, LedgerSession(a) as s:
            s.start("s")
            for i in range(turns):
                req = a.request(f"Question {i}: " + "what about this part? " * 8)
                gc.collect()
                started = time.perf_counter()
                ctx = s.assemble(req)
                times.append(1000 * (time.perf_counter() - started))
                answer = f"Answer {i}. " + "It depends on the part, and on the rest. " * 30
                s.record_turn(req, [ctx.current_message, Message.of("assistant", answer)])
                if noise is not None:
                    estimated = ctx.token_budget.used.total
                    raw = estimated / tok.factor  # type: ignore[attr-defined]
                    counted = round(raw * ratio * (1 + rng.uniform(-noise, noise)))
                    tok.observe(estimated, counted)  # type: ignore[attr-defined]
        return statistics.median(times[-last:]), getattr(tok, "revision", 0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--last", type=int, default=50, help="turns timed, at the end")
    parser.add_argument("--ratio", type=float, default=1.13, help="provider's count / estimate")
    parser.add_argument("--noise", type=float, default=0.02, help="its turn-to-turn spread")
    args = parser.parse_args(argv)
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    plain, _ = session(args.turns, args.last, args.ratio, None)
    reported, changes = session(args.turns, args.last, args.ratio, args.noise)
    print(
        f"{MODEL}, {args.turns} turns, usage {args.ratio:g}x the estimate +-{args.noise:.0%}: "
        f"{reported:.2f} ms a request with usage reported, {plain:.2f} ms without, "
        f"{reported / plain:.2f}x; the factor changed {changes} times"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

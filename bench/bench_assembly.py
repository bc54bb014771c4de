"""Assembly latency: Lamina vs LangChain's ``trim_messages`` on the same history, in one run.

A deterministic history of alternating user/assistant turns is cut from the Python standard
library's own source (top-level ``*.py`` files in sorted order, slice sizes from a seeded RNG),
so it is real text, identical on every run of the same Python, and needs no network. Both
systems trim it to the same budget with the same o200k_base encoding (Lamina's offline copy):

* Lamina: ``gpt-4o``, ``budget.max_tokens`` = budget, no reserves, ``fit.strategy`` =
  ``rollingWindow`` (the match for LangChain's ``strategy="last"``; the default
  ``truncateMiddle`` is timed too). Cold = a fresh Assembler's first ``assemble`` (every block
  tokenized); warm = ``assemble`` again on the same Assembler (counts memoized by content).
* LangChain: ``trim_messages(strategy="last", start_on="human")`` with a ``token_counter`` that
  sums ``len(enc.encode(m.content))``. It memoizes nothing, so cold is a call on freshly built
  message objects and warm a call on the same list again.
* LangChain, precomputed: the same call with a ``token_counter`` that reads each message's
  count from a dict filled beforehand (untimed): the peer's best fair configuration for a warm
  turn, and the one Lamina's warm assembly is measured against.

Run: ``.venv/bin/python bench/bench_assembly.py [--messages 1000] [--budget 128000] [--repeat 5]``
Timings are medians and minimums of ``--repeat`` runs (wall clock, ``time.perf_counter``), in
interleaved rounds: each round every system takes its samples in turn, so background load hits
all of them alike. ``--warm-only`` times only Lamina's warm assembly and the precomputed peer
(cold Lamina and the re-tokenizing LangChain take minutes at 10,000 messages).
``--request-history`` gives Lamina the history as a host passes it (``AssemblyRequest.history``,
served by the built-in ``history`` layer) instead of from a plugin's provider (the default).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

from lamina import Assembler, Message
from lamina.model.blocks import Block
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import load_encoding

SEED = 20260102
ENCODING = "o200k_base"
#: Slice sizes in characters; Python source runs ~3.5–4 characters per o200k token, so a
#: message is roughly 300–600 tokens and 1,000 of them ~450k tokens, far above 128k.
MIN_CHARS, MAX_CHARS = 1_200, 2_400
CURRENT_MESSAGE = "Summarize what we covered so far."


# -- data ----------------------------------------------------------------------------------


def stdlib_sources() -> list[Path]:
    """The standard library's top-level modules in sorted order (then the rest, if needed)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(root.glob("*.py")) + sorted(
        p for p in root.rglob("*.py") if p.parent != root and "site-packages" not in p.parts
    )


def build_history(count: int, seed: int = SEED) -> list[tuple[str, str]]:
    """``count`` (role, text) pairs, user first, each a run of whole lines of stdlib source."""
    rng = random.Random(seed)
    lines: list[str] = []
    messages: list[tuple[str, str]] = []
    files = iter(stdlib_sources())
    while len(messages) < count:
        target = rng.randint(MIN_CHARS, MAX_CHARS)
        chunk: list[str] = []
        size = 0
        while size < target:
            if not lines:
                path = next(files)  # StopIteration here means the stdlib is too small
                lines = path.read_text("utf-8", errors="replace").splitlines(keepends=True)
                lines.reverse()
                continue
            line = lines.pop()
            chunk.append(line)
            size += len(line)
        text = "".join(chunk).strip()
        if text:
            messages.append(("user" if len(messages) % 2 == 0 else "assistant", text))
    return messages


def lamina_blocks(history: Sequence[tuple[str, str]]) -> list[Block]:
    """Session-layer blocks; a user message and its reply share a group (one turn)."""
    return [
        Block.text(f"m{i:05d}", "session", text, role=role, group=f"turn{i // 2:05d}")  # type: ignore[arg-type]
        for i, (role, text) in enumerate(history)
    ]


def langchain_messages(history: Sequence[tuple[str, str]]) -> list[BaseMessage]:
    return [
        HumanMessage(content=text) if role == "user" else AIMessage(content=text)
        for role, text in history
    ]


# -- systems under test ----------------------------------------------------------------------


def lamina_config(budget: int, strategy: str) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "fit": {"strategy": strategy},
    }


def new_assembler(blocks: list[Block], budget: int, strategy: str) -> Assembler:
    return make_assembler(
        lamina_config(budget, strategy),
        plugins=[("bench-history", StaticProvider(blocks, name="bench-history"))],
    )


def make_counter(enc: Any) -> Callable[[list[BaseMessage]], int]:
    def count(messages: list[BaseMessage]) -> int:
        return sum(len(enc.encode(m.content, disallowed_special=())) for m in messages)  # type: ignore[arg-type]

    return count


def trim(messages: list[BaseMessage], budget: int, counter: Callable[..., int]) -> Any:
    return trim_messages(
        messages,
        max_tokens=budget,
        token_counter=counter,
        strategy="last",
        start_on="human",
        include_system=False,
    )


# -- timing ----------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    started = time.perf_counter()
    result = fn()
    return 1000 * (time.perf_counter() - started), result


def stats(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), min(samples)


class LaminaRunner:
    """Cold: a fresh Assembler per sample (plugin resolution untimed), its first ``assemble``.
    Warm: one primed Assembler, ``assemble`` again."""

    def __init__(
        self,
        blocks: list[Block],
        budget: int,
        strategy: str,
        cold: bool = True,
        messages: tuple[Message, ...] | None = None,
    ) -> None:
        self.blocks, self.budget, self.strategy, self.timing_cold = blocks, budget, strategy, cold
        self.messages = messages  # the history as the host passes it, instead of a plugin's
        self.warm_asm = self.assembler()
        self.warm_request = self.warm_asm.request(CURRENT_MESSAGE, history=messages)
        self.ctx = self.warm_asm.assemble(self.warm_request)  # prime the memo
        self.cold: list[float] = []
        self.warm: list[float] = []
        self.phases: dict[str, list[float]] = {}

    def assembler(self) -> Assembler:
        if self.messages is None:
            return new_assembler(self.blocks, self.budget, self.strategy)
        return make_assembler(lamina_config(self.budget, self.strategy))

    def sample(self) -> None:
        if self.timing_cold:
            asm = self.assembler()
            request = asm.request(CURRENT_MESSAGE, history=self.messages)
            ms, _ = timed(lambda: asm.assemble(request))
            self.cold.append(ms)
            asm.close()
        ms, self.ctx = timed(lambda: self.warm_asm.assemble(self.warm_request))
        self.warm.append(ms)
        for phase, took in self.ctx.report.timings_ms.items():
            self.phases.setdefault(phase, []).append(took)


class LangChainRunner:
    """Cold: ``trim_messages`` on freshly built message objects (building untimed).
    Warm: on the same, already trimmed-once list again."""

    def __init__(
        self,
        history: Sequence[tuple[str, str]],
        budget: int,
        counter: Callable[..., int],
        cold: bool = True,
    ) -> None:
        self.history, self.budget, self.counter, self.timing_cold = history, budget, counter, cold
        self.messages = langchain_messages(history)
        self.kept = trim(self.messages, budget, counter)
        self.cold: list[float] = []
        self.warm: list[float] = []

    def sample(self) -> None:
        if self.timing_cold:
            fresh = langchain_messages(self.history)
            ms, _ = timed(lambda: trim(fresh, self.budget, self.counter))
            self.cold.append(ms)
        ms, self.kept = timed(lambda: trim(self.messages, self.budget, self.counter))
        self.warm.append(ms)


def growing(
    history: Sequence[tuple[str, str]],
    sizes: Sequence[int],
    budget: int,
    start: int,
    turns: int,
    messages: tuple[Message, ...] | None = None,
) -> dict[str, list[float]]:
    """Each round the session gains one turn (two messages) and both systems trim it: Lamina
    with a new event each call on one Assembler, LangChain with precomputed counts. Lamina has
    counted every message once beforehand (untimed), as a ledger stores each message's exact
    count: neither system tokenizes history while timed. With ``messages``, Lamina gets the
    history as a host passes it (the first ``end`` of them with each request)."""
    blocks = lamina_blocks(history)
    shown = {"blocks": blocks if messages is None else []}
    asm = make_assembler(
        lamina_config(budget, "rollingWindow"),
        plugins=[("bench-history", StaticProvider(lambda ctx: shown["blocks"], name="bench"))],
    )
    # Every message counted once, as the peer's are.
    asm.assemble(asm.request(CURRENT_MESSAGE, history=messages))
    shown["blocks"] = blocks[:start] if messages is None else []
    asm.assemble(asm.request(CURRENT_MESSAGE, history=messages and messages[:start]))
    peers = langchain_messages(history)
    known = dict(zip((text for _, text in history), sizes, strict=True))

    def count(batch: list[BaseMessage]) -> int:
        return sum(known[m.content] for m in batch)  # type: ignore[index]

    out: dict[str, list[float]] = {"Lamina (rollingWindow)": [], "LangChain, precomputed": []}
    for turn in range(turns):
        end = start + 2 * (turn + 1)
        shown["blocks"] = blocks[:end] if messages is None else []
        passed = messages and messages[:end]
        request = asm.request(f"{CURRENT_MESSAGE} ({turn})", history=passed)
        ms, ctx = timed(lambda: asm.assemble(request))  # noqa: B023 - called at once
        if ctx.token_budget.used.total > budget:
            raise SystemExit(f"ERROR: Lamina used {ctx.token_budget.used.total} > {budget}")
        out["Lamina (rollingWindow)"].append(ms)
        batch = peers[:end]
        ms, _ = timed(lambda: trim(batch, budget, count))  # noqa: B023 - called at once
        out["LangChain, precomputed"].append(ms)
    asm.close()
    return out


# -- report ----------------------------------------------------------------------------------


def lamina_kept(ctx: Any) -> list[str]:
    """Ids of the history blocks Lamina kept (the gap marker excluded)."""
    return [
        b.id
        for b in ctx.report.blocks
        if b.layer == "session" and b.plugin != "core" and b.status != "dropped"
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=128_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--warm-only",
        action="store_true",
        help="time only Lamina's warm assembly and trim_messages with precomputed counts",
    )
    parser.add_argument(
        "--request-history",
        action="store_true",
        help="Lamina gets the history as a host passes it (AssemblyRequest.history, the "
        "built-in history layer) instead of from a plugin's provider",
    )
    parser.add_argument(
        "--grow",
        type=int,
        default=0,
        metavar="TURNS",
        help="instead: a session of --messages gaining one turn per call, TURNS calls",
    )
    args = parser.parse_args(argv)
    budget, repeat, cold = args.budget, args.repeat, not args.warm_only

    enc = load_encoding(ENCODING)  # loaded once, before any timing, for both systems
    history = build_history(args.messages + 2 * args.grow)
    sizes = [len(enc.encode(text, disallowed_special=())) for _, text in history]
    if args.grow:
        print(
            f"a session of {args.messages} messages gaining one turn per call, {args.grow} "
            f"calls; budget {budget:,}; Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs"
        )
        passed = (
            tuple(Message.of(role, text) for role, text in history)  # type: ignore[arg-type]
            if args.request_history
            else None
        )
        runs = growing(history, sizes, budget, args.messages, args.grow, passed)
        peer = statistics.median(runs["LangChain, precomputed"])
        for label, times in runs.items():
            median, low = stats(times)
            print(
                f"{label:<28} median {median:.3f}ms (min {low:.3f}ms) "
                f"{median / peer:.2f}x the precomputed peer"
            )
        return 0
    blocks = lamina_blocks(history)
    counter = make_counter(enc)

    print(
        f"machine: {platform.platform()} | {platform.machine()} | "
        f"Python {platform.python_version()} ({platform.python_implementation()}) | "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"history: {len(history)} messages, {sum(sizes):,} {ENCODING} tokens "
        f"({min(sizes)}–{max(sizes)} each, median {statistics.median(sizes):.0f}); "
        f"budget {budget:,}; repeat {repeat}; seed {SEED}" + ("; warm only" if not cold else "")
    )
    print()

    strategies = ("rollingWindow", "truncateMiddle")
    messages = (
        tuple(Message.of(role, text) for role, text in history)  # type: ignore[arg-type]
        if args.request_history
        else None
    )
    laminas = {s: LaminaRunner(blocks, budget, s, cold, messages) for s in strategies}
    langchain = LangChainRunner(history, budget, counter) if cold else None
    known = dict(zip((text for _, text in history), sizes, strict=True))
    precomputed = LangChainRunner(
        history, budget, lambda messages: sum(known[m.content] for m in messages), cold=False
    )
    # Interleaved rounds: background load on the machine hits every system alike.
    for _ in range(repeat):
        for runner in (*laminas.values(), *([langchain] if langchain else []), precomputed):
            runner.sample()

    by_id = {b.id: n for n, b in zip(sizes, blocks, strict=True)}
    by_id.update({f"history:{i}": n for i, n in enumerate(sizes)})
    rows: dict[str, tuple[list[float], list[float], int, int]] = {}
    for strategy, runner in laminas.items():
        ctx = runner.ctx
        kept = lamina_kept(ctx)
        used = ctx.token_budget.used
        if used.total > budget:  # a correctness check, not a timing assertion
            print(f"ERROR: Lamina ({strategy}) used {used.total} tokens > budget {budget}")
            return 1
        rows[f"Lamina ({strategy})"] = (
            runner.cold,
            runner.warm,
            len(kept),
            sum(by_id[i] for i in kept),
        )
        dropped = ", ".join(
            f"{d.layer} {d.blocks} ({d.first_id}…{d.last_id})" for d in ctx.report.dropped
        )
        print(
            f"Lamina ({strategy}): kept {len(kept)} messages; used.total {used.total:,} "
            f"<= {budget:,} (history {used.history:,} incl. the gap marker, "
            f"current message {used.event}); dropped: {dropped or 'none'}"
        )
    for label, runner in (
        ("LangChain trim_messages", langchain),
        ("LangChain, precomputed", precomputed),
    ):
        if runner is not None:
            kept_tokens = (
                counter(runner.kept)
                if runner is langchain
                else sum(
                    known[m.content]
                    for m in runner.kept  # type: ignore[index]
                )
            )
            rows[label] = (runner.cold, runner.warm, len(runner.kept), kept_tokens)
            print(f"{label}: kept {len(runner.kept)} messages; {kept_tokens:,} tokens")
    if langchain is not None:
        calls = encoded = 0

        def counting(messages: list[BaseMessage]) -> int:
            nonlocal calls, encoded
            calls, encoded = calls + 1, encoded + len(messages)
            return counter(messages)

        trim(langchain_messages(history), budget, counting)
        print(
            f"  (its token_counter ran {calls} times over {encoded:,} messages in one trim: "
            "the binary search re-counts every prefix it tries)"
        )
    print()

    header = (
        f"{'system':<28} {'cold median':>12} {'cold min':>10} {'warm median':>12} "
        f"{'warm min':>10} {'kept msgs':>10} {'kept tokens':>12}"
    )
    print(header)
    print("-" * len(header))
    for label, (cold_ms, warm, kept_n, kept_tokens) in rows.items():
        (wm, wn) = stats(warm)
        cm, cn = (f"{x:.2f}ms" for x in stats(cold_ms)) if cold_ms else ("-", "-")
        print(
            f"{label:<28} {cm:>12} {cn:>10} {wm:>10.2f}ms {wn:>8.2f}ms "
            f"{kept_n:>10} {kept_tokens:>12,}"
        )
    print("(kept tokens: message content only, o200k_base, counted the same way for both)")
    print()

    if langchain is not None:
        print("ratio = LangChain time / Lamina time (> 1 means Lamina is faster), median (min)")
        lc_cold, lc_warm = stats(langchain.cold), stats(langchain.warm)
        for strategy, runner in laminas.items():
            cold_s, warm = stats(runner.cold), stats(runner.warm)
            print(
                f"  vs Lamina ({strategy}): cold {lc_cold[0] / cold_s[0]:.2f}x "
                f"({lc_cold[1] / cold_s[1]:.2f}x), warm {lc_warm[0] / warm[0]:.2f}x "
                f"({lc_warm[1] / warm[1]:.2f}x)"
            )
    pc_warm = stats(precomputed.warm)
    print(
        f"LangChain trim_messages, precomputed counts: warm median {pc_warm[0]:.3f}ms "
        f"(min {pc_warm[1]:.3f}ms)"
    )
    for strategy, runner in laminas.items():
        warm = stats(runner.warm)
        print(
            f"  Lamina ({strategy}) warm / precomputed peer: {warm[0] / pc_warm[0]:.2f}x "
            f"(min {warm[1] / pc_warm[1]:.2f}x)  (<= 1.0 means Lamina is at least as fast)"
        )
    print()
    for strategy, runner in laminas.items():
        shown = ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in runner.phases.items())
        print(f"Lamina ({strategy}) warm phases, medians (ms): {shown}")
    for runner in laminas.values():
        runner.warm_asm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

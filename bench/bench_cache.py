"""Prompt-cache hit ratio over a long session: the ledger plugin's cache-aware compaction vs
LangChain's rolling-window ``trim_messages(strategy="last")`` on the same conversation.

A 300-turn agent session is built from the Python standard library's own source (seeded, no
network): each turn is a user ask, an assistant tool call (``read``), a large tool result and
an assistant reply. Each system assembles every request of the session at a 32k and a 128k
budget; a request is the system prompt, the history and the current ask. Measured per run:

* cache-hit ratio: tokens of each request identical to the start of the previous request
  (whole leading messages; counted only when that prefix is at least 1,024 tokens, the
  providers' minimum cacheable prefix), over all input tokens;
* mean input tokens per request, and requests over budget;
* cost-weighted input tokens per request: tokens not served from cache are cache writes at
  1.25x, cached tokens are reads at 0.1x.

Lamina: ``LedgerSession.assemble`` (proactive compaction at ``compact_target``) then
``record_turn`` after each request, SQLite ledger in a temp dir, extractive summarizer.
LangChain: ``trim_messages(history, max_tokens=budget - system - ask, strategy="last",
start_on="human")``. Both count with o200k_base.

A second part times assembly of a 100-turn and a 10,000-turn ledger session (compacted every
50 turns, 20 kept): assembly reads only what is kept, so the two should cost about the same.

Run: ``.venv/bin/python bench/bench_cache.py [--turns 300] [--targets 0.3,0.4,0.5,0.6]``
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as ledger_plugin
from lamina_ledger.ledger import Ledger
from lamina_ledger.session import LedgerSession

from lamina import Block, Message, TextPart, ToolCallPart, ToolResultPart, Usage
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import load_encoding

SEED = 20260102
MIN_PREFIX = 1024
WRITE, READ = 1.25, 0.10
BUDGETS = (32_000, 128_000)


# -- data ----------------------------------------------------------------------------------


def stdlib_sources() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(root.glob("*.py")) + sorted(
        p for p in root.rglob("*.py") if p.parent != root and "site-packages" not in p.parts
    )


class Source:
    """Consecutive runs of whole lines of stdlib source, in file order."""

    def __init__(self) -> None:
        self.files = iter(stdlib_sources())
        self.lines: list[str] = []
        self.path = ""
        self.root = Path(sysconfig.get_paths()["stdlib"])

    def take(self, chars: int) -> str:
        chunk, size = [], 0
        while size < chars:
            if not self.lines:
                p = next(self.files)
                self.path = str(p.relative_to(self.root))
                self.lines = p.read_text("utf-8", errors="replace").splitlines(keepends=True)
                self.lines.reverse()
                continue
            line = self.lines.pop()
            chunk.append(line)
            size += len(line)
        return "".join(chunk).strip() or "pass"


def build_session(turns: int, seed: int = SEED) -> tuple[str, list[list[Message]]]:
    """The system prompt and ``turns`` turns of (ask, tool call, tool result, reply)."""
    rng = random.Random(seed)
    src = Source()
    system = "You are a careful code-review agent.\n\n" + src.take(6_000)
    out = []
    for i in range(turns):
        ask = f"Turn {i}: review this and tell me what to change.\n" + src.take(
            rng.randint(200, 700)
        )
        result = src.take(rng.randint(1_500, 6_000))
        call = ToolCallPart(id=f"call_{i}", name="read", arguments={"path": src.path})
        reply = src.take(rng.randint(300, 900))
        out.append(
            [
                Message.of("user", ask),
                Message(role="assistant", content=(call,)),
                Message(role="tool", content=(ToolResultPart(call_id=call.id, content=result),)),
                Message.of("assistant", reply),
            ]
        )
    return system, out


# -- measuring -----------------------------------------------------------------------------


class Meter:
    """Counts each request's tokens and the prefix it shares with the previous request."""

    def __init__(self, enc: Any, budget: int) -> None:
        self.enc, self.budget = enc, budget
        self.memo: dict[str, int] = {}
        self.prev: list[tuple[str, int]] = []
        self.inputs: list[int] = []
        self.hits: list[int] = []
        self.over = 0

    def tokens(self, key: str, text: str) -> int:
        n = self.memo.get(key)
        if n is None:
            n = self.memo[key] = len(self.enc.encode(text, disallowed_special=()))
        return n

    def request(self, entries: list[tuple[str, str]], used: int | None = None) -> tuple[int, int]:
        sized = [(k, self.tokens(k, t)) for k, t in entries]
        total = sum(n for _, n in sized)
        shared = 0
        for (a, n), (b, _) in zip(sized, self.prev, strict=False):
            if a != b:
                break
            shared += n
        hit = shared if shared >= MIN_PREFIX else 0
        self.inputs.append(total)
        self.hits.append(hit)
        self.over += (used if used is not None else total) > self.budget
        self.prev = sized
        return total, hit

    def summary(self) -> dict[str, float]:
        total, hit = sum(self.inputs), sum(self.hits)
        cost = sum(WRITE * (i - h) + READ * h for i, h in zip(self.inputs, self.hits, strict=True))
        n = len(self.inputs)
        return {
            "hit_ratio": hit / total,
            "mean_input": total / n,
            "over_budget": self.over,
            "cost_per_request": cost / n,
        }


def message_entry(role: str, parts: Sequence[Any]) -> tuple[str, str]:
    texts = []
    for p in parts:
        if isinstance(p, TextPart):
            texts.append(p.text)
        elif isinstance(p, ToolResultPart):
            texts.append(p.content)
        elif isinstance(p, ToolCallPart):
            texts.append(p.name + json.dumps(p.arguments, sort_keys=True))
    text = "\n".join(texts)
    return f"{role}\x00{hash(text)}\x00{len(text)}", text


def run_lamina(
    system: str, turns: list[list[Message]], budget: int, target: float, enc: Any
) -> tuple[dict[str, float], int, dict[str, Any]]:
    meter = Meter(enc, budget)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "model": "gpt-4o",
            "session": "bench",
            "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
            "plugins": {
                "ledger": {
                    "database": f"{tmp}/ledger.db",
                    "compact_target": target,
                    "recovery_target": min(0.4, target),
                }
            },
        }
        block = Block.text("system", "workspace", system, trusted=True)
        a = make_assembler(
            cfg, plugins=[("ledger", ledger_plugin), ("system", StaticProvider([block]))]
        )
        with a, LedgerSession(a) as s:
            s.start("bench")
            for turn in turns:
                req = a.request(turn[0].text)
                ctx = s.assemble(req)
                entries = [("system\x00" + str(hash(ctx.system_prompt)), ctx.system_prompt)]
                entries += [message_entry(m.role, m.content) for m in ctx.history]
                entries.append(message_entry("user", ctx.current_message.content))
                total, hit = meter.request(entries, ctx.token_budget.used.total)
                s.record_turn(req, turn, usage=Usage(input_tokens=total, cached_input_tokens=hit))
            stats = s.ledger.stats("bench")
            compactions = len(s.compactions)
    return meter.summary(), compactions, {"stats_ratio": stats.cache_hit_ratio}


def run_trim(system: str, turns: list[list[Message]], budget: int, enc: Any) -> dict[str, float]:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        ToolMessage,
        trim_messages,
    )

    meter = Meter(enc, budget)
    counts: dict[int, int] = {}

    def count_one(m: BaseMessage) -> int:
        key = id(m)
        if key not in counts:
            text = m.content if isinstance(m.content, str) else json.dumps(m.content)
            for tc in getattr(m, "tool_calls", None) or []:
                text += tc["name"] + json.dumps(tc["args"], sort_keys=True)
            counts[key] = len(enc.encode(text, disallowed_special=()))
        return counts[key]

    def counter(messages: list[BaseMessage]) -> int:
        return sum(count_one(m) for m in messages)

    history: list[BaseMessage] = []
    lc_of: dict[int, Message] = {}
    sys_tokens = meter.tokens("system", system)
    for turn in turns:
        ask = turn[0].text
        ask_tokens = len(enc.encode(ask, disallowed_special=()))
        kept = trim_messages(
            history,
            max_tokens=budget - sys_tokens - ask_tokens,
            token_counter=counter,
            strategy="last",
            start_on="human",
        )
        entries = [("system", system)]
        entries += [message_entry(lc_of[id(m)].role, lc_of[id(m)].content) for m in kept]
        entries.append(message_entry("user", turn[0].content))
        meter.request(entries)
        for m in turn:
            if m.role == "user":
                lm: BaseMessage = HumanMessage(content=m.text)
            elif m.role == "tool":
                part = m.content[0]
                lm = ToolMessage(content=part.content, tool_call_id=part.call_id)
            elif isinstance(m.content[0], ToolCallPart):
                call = m.content[0]
                lm = AIMessage(
                    content="",
                    tool_calls=[{"name": call.name, "args": call.arguments, "id": call.id}],
                )
            else:
                lm = AIMessage(content=m.text)
            lc_of[id(lm)] = m
            history.append(lm)
    return meter.summary()


# -- scale ---------------------------------------------------------------------------------


def time_assembly(turns: int, repeat: int) -> tuple[float, int]:
    """Median ms to assemble a session of ``turns`` turns (compacted every 50, 20 kept)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/ledger.db"
        ids: list[str] = []
        with Ledger.open(db) as w, w.batch("scale"):
            for i in range(turns):
                ids.append(
                    w.append_turn(
                        "scale",
                        [
                            Message.of("user", f"ask {i} about item {i * 7}"),
                            Message.of("assistant", f"answer {i}: " + "details " * 40),
                        ],
                        total_tokens=60,
                    )
                )
                if i % 50 == 49:
                    w.record_compaction(
                        "scale", f"summary up to {i}", ids[-20], trigger="context_limit"
                    )
        cfg = {
            "model": "gpt-4o",
            "session": "scale",
            "budget": {"max_tokens": 128_000, "reserve_response": 0, "reserve_tools": 0},
            "plugins": {"ledger": {"database": db}},
        }
        with make_assembler(cfg, plugins=[("ledger", ledger_plugin)]) as a:
            req = a.request("next")
            kept = len(a.assemble(req).history)
            samples = []
            for _ in range(repeat):
                t = time.perf_counter()
                a.assemble(req)
                samples.append(1000 * (time.perf_counter() - t))
    return statistics.median(samples), kept


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=300)
    ap.add_argument("--targets", default="0.3,0.4,0.5,0.6")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    targets = [float(x) for x in args.targets.split(",")]
    enc = load_encoding("o200k_base")
    system, turns = build_session(args.turns)
    total = sum(
        len(enc.encode(message_entry(m.role, m.content)[1], disallowed_special=()))
        for t in turns
        for m in t
    )
    print(f"# {platform.platform()}, CPython {platform.python_version()}")
    print(
        f"session: {args.turns} turns, {total:,} tokens of history, system prompt "
        f"{len(enc.encode(system)):,} tokens (o200k_base)"
    )
    header = f"{'budget':>7} {'system':<26} {'hit ratio':>9} {'mean input':>10} {'over':>4} {'cost/request':>12} {'vs trim':>7} {'compactions':>11}"
    print(header)
    print("-" * len(header))
    for budget in BUDGETS:
        base = run_trim(system, turns, budget, enc)
        print(
            f"{budget:>7} {'LangChain trim (last)':<26} {base['hit_ratio']:>9.3f} {base['mean_input']:>10,.0f} "
            f"{base['over_budget']:>4} {base['cost_per_request']:>12,.0f} {1:>7.2f} {'-':>11}"
        )
        for target in targets:
            got, compactions, extra = run_lamina(system, turns, budget, target, enc)
            ratio = got["cost_per_request"] / base["cost_per_request"]
            print(
                f"{budget:>7} {f'Lamina ledger ({target})':<26} {got['hit_ratio']:>9.3f} {got['mean_input']:>10,.0f} "
                f"{got['over_budget']:>4} {got['cost_per_request']:>12,.0f} {ratio:>7.2f} {compactions:>11}"
                f"   (ledger stats ratio {extra['stats_ratio']:.3f})"
            )
    small, kept_small = time_assembly(100, args.repeat)
    large, kept_large = time_assembly(10_000, args.repeat)
    print(
        f"assembly: 100 turns {small:.2f} ms ({kept_small} msgs), 10,000 turns {large:.2f} ms "
        f"({kept_large} msgs): ratio {large / small:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

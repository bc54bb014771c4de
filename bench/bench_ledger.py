"""The ledger in an agent loop: ``LedgerSession.assemble`` per request vs LangChain
``trim_messages`` with precomputed counts (the fair peer), in one run; and a 10,000-turn
uncompacted session vs a 100-turn one.

Part 1. The 300-turn code-review session of ``bench_cache.py`` (stdlib source, seeded, no
network) runs through ``LedgerSession`` (assemble, then ``record_turn``) at a 32k and a 128k
budget, SQLite ledger in a temp dir, the system prompt declared in config (``[[blocks]]``).
After the 300 turns, ``--requests`` more turns are timed: each request's
``LedgerSession.assemble`` (compactions included, as they happen) and, on the same history at
the same step, the peer's request: the new user message counted (tiktoken's
``encode_ordinary``), then ``trim_messages(strategy="last", start_on="human")`` whose
``token_counter`` reads a dict of the history's counts made beforehand (untimed, in a child
process). Each side counts every message once: the history's when it was recorded (Lamina in
``record_turn``, untimed), the new message in the request that brings it. The peer's
``trim_messages`` alone is printed too (the new message's count made beforehand, as this
script did before 2026-11-26). Rounds interleave the two, each request alternating which side
runs first; medians per request and their ratio (Lamina / peer: <= 1.0 means Lamina is as
fast). The median of Lamina's requests that compacted is printed too, over the whole run
(the 300 turns before timing included: few of the timed ones compact). What runs before each timed call is ``--between`` (the target's figure is the default's):
``collect``, ``gc.collect()``, a full collection, which in this process walks far more memory
than the CPU caches hold, as a stand-in for what happens between a request and the next (the
walk reads every tracked object's header and references, so the most recently walked objects,
the data of either side, are left in the caches); ``collect-evict``, the same collection and
then ``evict``'s eviction, which leaves neither side's data warm;
``nothing`` (or ``--keep-caches``) leaves collections to the interpreter, caches as warm as
back-to-back requests leave them; ``evict`` writes one byte per cache line of a buffer four
times this machine kind's 32 MiB L3 cache (data caches cold, nothing else disturbed);
``host`` runs a host's own work first (a model reply's JSON parsed and written, text scanned
with a regular expression and sorted, an e-mail parsed, a query string built: a few
milliseconds of standard-library code) and then evicts as ``evict`` does. Each budget runs in a fresh process,
where Lamina counts as it would in a host of its own (its first 500,000 characters with the
small-text counter); ``--host-encoding`` builds tiktoken's encoding first, as a host that
counts with tiktoken itself (the peer's) has, and Lamina's tokenizers then use it.

Part 2. Two ledger sessions of short turns, 100 and 10,000 turns, never compacted (a budget
that holds both whole). Each timed request appends one turn (untimed) and assembles; the
ratio of medians is what the long session costs over the short one. The ``record_turn`` that
appends the turn (the previous request's) is timed too, separately.

Run: ``.venv/bin/python bench/bench_ledger.py [--host-encoding] [--between REGIME] [--requests 40]
[--samples 30]``
"""

from __future__ import annotations

import argparse
import email
import gc
import json
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as ledger_plugin
from bench_cache import build_session
from lamina_ledger.ledger import Ledger
from lamina_ledger.session import LedgerSession
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, trim_messages

from lamina import Message, ToolCallPart
from lamina.testing import make_assembler
from lamina.tokens import load_encoding

BUDGETS = (32_000, 128_000)
#: ``--between`` choices and how the report names them.
REGIMES = {
    "collect": "gc.collect()",
    "nothing": "nothing, caches kept",
    "collect-evict": "gc.collect(), then a cache eviction",
    "evict": "a cache eviction",
    "host": "a host's own work, then a cache eviction",
}


def to_langchain(m: Message) -> BaseMessage:
    if m.role == "user":
        return HumanMessage(content=m.text)
    if m.role == "tool":
        part = m.content[0]
        return ToolMessage(content=part.content, tool_call_id=part.call_id)  # type: ignore[union-attr]
    if isinstance(m.content[0], ToolCallPart):
        call = m.content[0]
        return AIMessage(
            content="", tool_calls=[{"name": call.name, "args": call.arguments, "id": call.id}]
        )
    return AIMessage(content=m.text)


def peer_text(m: Message) -> str:
    """What the peer's counter counts for a message (a tool call: its name and arguments)."""
    return m.text or json.dumps(
        [(p.name, p.arguments) for p in m.content if isinstance(p, ToolCallPart)]
    )


def session_counts(turns: int) -> dict[str, Any]:
    """The peer's precomputed counts for the session of ``turns`` turns: the system prompt's,
    each turn's first message's, each message's."""
    enc = load_encoding("o200k_base")
    system, made = build_session(turns)

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return {
        "system": count(system),
        "turns": [[count(peer_text(m)) for m in turn] for turn in made],
        "asks": [count(turn[0].text) for turn in made],
    }


def counts_elsewhere(turns: int) -> dict[str, Any]:
    """``session_counts`` made in a child process, so this one never builds tiktoken's BPE
    for the peer: Lamina counts as it would in a host of its own."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import bench_ledger as b; "
        "print(json.dumps(b.session_counts(int(sys.argv[2]))))"
    )
    here = str(Path(__file__).parent)
    out = subprocess.run(
        [sys.executable, "-c", code, here, str(turns)], check=True, capture_output=True, text=True
    )
    found: dict[str, Any] = json.loads(out.stdout)
    return found


def clock(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return 1000 * (time.perf_counter() - started), out


def peer_request(
    ask: str,
    asked: int | None,
    encode: Any,
    into: list[float],
    history: list[BaseMessage],
    room: int,
    counter: Any,
) -> None:
    """The peer's request: the new message counted once, as it arrives (``asked`` when it was
    counted beforehand; the seconds it takes go to ``into``), then ``trim_messages``."""
    started = time.perf_counter()
    if asked is None:
        asked = len(encode(ask))
    into.append(time.perf_counter() - started)
    trim_messages(
        history,
        max_tokens=room - asked,
        token_counter=counter,
        strategy="last",
        start_on="human",
    )


#: Bytes ``evict`` writes through: four times the 32 MiB L3 cache of this machine kind.
EVICT_BYTES = 128 << 20


def host_work() -> Callable[[], None]:
    """A few milliseconds of a host's own work between requests, made deterministic: parse
    and write a model reply's JSON, scan and sort its text, parse an e-mail, build a query."""
    rng = random.Random(7)
    words = ["alpha", "beta", "γάμμα", "delta", "epsilon", "zeta"]
    reply = json.dumps(
        {
            "choices": [
                {
                    "message": {
                        "content": " ".join(rng.choice(words) for _ in range(20_000)),
                        "tool_calls": [
                            {"id": f"c{i}", "function": {"name": "read", "arguments": f"[{i}]"}}
                            for i in range(200)
                        ],
                    }
                }
            ]
        }
    )
    mail = "From: a@example.org\nTo: b@example.org\nSubject: run\n\n" + "line\n" * 2000
    word = re.compile(r"\b[a-z]+\b")

    def work() -> None:
        json.dumps(json.loads(reply))
        word.findall(reply[:300_000])
        sorted(reply[:200_000].split())
        email.message_from_string(mail)
        urllib.parse.urlencode({f"k{i}": i for i in range(2000)})

    return work


def collect() -> None:
    gc.collect()


def between_calls(regime: str) -> Callable[[], None]:
    """What runs before each timed call (``--between``)."""
    if regime == "nothing":
        return lambda: None
    if regime == "collect":
        return collect
    buffer = bytearray(EVICT_BYTES)
    zeros = bytes(EVICT_BYTES // 64)

    def evict() -> None:
        buffer[::64] = zeros

    if regime == "evict":
        return evict
    if regime == "collect-evict":

        def collect_evict() -> None:
            collect()
            evict()

        return collect_evict
    work = host_work()

    def host() -> None:
        work()
        evict()

    return host


def distinct_calls(count: int) -> Callable[[], None]:
    """A probe: ``count`` calls, each to a different small function made for it (what more
    distinct code, and more calls, cost a request after a collection)."""
    space: dict[str, Any] = {}
    exec("\n".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(count)), space)
    functions = [space[f"f{i}"] for i in range(count)]

    def run() -> None:
        total = 0
        for f in functions:
            total = f(total)

    return run


def probed(probe: Callable[[], None], call: Callable[[], Any]) -> Any:
    probe()
    return call()


def agent_loop(
    budget: int,
    warmup: int,
    requests: int,
    made: dict[str, Any],
    *,
    between: str = "collect",
    extra_calls: int = 0,
) -> dict[str, Any]:
    """Median ms per request after ``warmup`` turns: Lamina and the peer, whose counts are
    ``made`` beforehand (``session_counts``); ``extra_calls``: a probe run inside each of
    Lamina's timed requests (``distinct_calls``); ``between``: what runs before each timed
    call (``between_calls``)."""
    system, turns = build_session(warmup + requests)
    counts: dict[int, int] = {}  # id(LangChain message) -> tokens, made untimed

    def counter(messages: list[BaseMessage]) -> int:
        return sum(counts[id(m)] for m in messages)

    history: list[BaseMessage] = []
    sys_tokens = made["system"]
    lamina_ms, peer_ms, trim_ms, compacting = [], [], [], 0
    compactions_ms: list[float] = []  # every request that compacted, the warm-up's included
    encode: Any = None  # the peer's tokenizer, built when timing starts
    before_call = between_calls(between)
    probe = distinct_calls(extra_calls) if extra_calls else None
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {
            "model": "gpt-4o",
            "session": "bench",
            "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
            "plugins": {"ledger": {"database": f"{tmp}/ledger.db"}},
            # The system prompt as a host declares it (the static provider, [[blocks]]).
            "blocks": [{"id": "system", "layer": "workspace", "text": system, "trusted": True}],
        }
        a = make_assembler(cfg, plugins=[("ledger", ledger_plugin)])
        with a, LedgerSession(a) as s:
            s.start("bench")
            for i, turn in enumerate(turns):
                req = a.request(turn[0].text)
                if i == warmup:  # (untimed; a host that counts for trim_messages has one)
                    encode = load_encoding("o200k_base").encode_ordinary
                before = len(s.compactions)
                peer_parts: list[float] = []
                asked = made["asks"][i] if encode is None else None
                peer = partial(peer_request, turn[0].text, asked, encode, peer_parts)
                peer = partial(peer, history, budget - sys_tokens, counter)

                ours: Callable[[], Any] = partial(s.assemble, req)
                if probe is not None:  # (--extra-calls: the probe runs inside the timed call)
                    ours = partial(probed, probe, ours)
                # Which side runs first alternates: the one right after the host's own work
                # between requests (here, making the peer's messages) finds colder caches.
                sides = [ours, peer]
                timed = {}
                for side in (0, 1) if i % 2 else (1, 0):
                    before_call()
                    timed[side] = clock(sides[side])[0]
                ms, whole = timed[0], timed[1]
                if len(s.compactions) > before:
                    compactions_ms.append(ms)
                if i >= warmup:
                    lamina_ms.append(ms)
                    peer_ms.append(whole)
                    trim_ms.append(whole - 1000 * peer_parts[0])
                    compacting += len(s.compactions) > before
                s.record_turn(req, turn)
                for m, tokens in zip(turn, made["turns"][i], strict=True):
                    lm = to_langchain(m)
                    counts[id(lm)] = tokens
                    history.append(lm)
            decoded = getattr(s.ledger, "decoded", "?")  # (a ledger before incremental reads)
    lm_med, pc_med = statistics.median(lamina_ms), statistics.median(peer_ms)
    trim_med = statistics.median(trim_ms)
    return {
        "lamina_ms": lm_med,
        "peer_ms": pc_med,
        "ratio": lm_med / pc_med,
        "trim_ms": trim_med,
        "trim_ratio": lm_med / trim_med,
        "compacting_requests": compacting,
        "compactions": len(compactions_ms),
        "compaction_ms": statistics.median(compactions_ms) if compactions_ms else None,
        "decoded_turns": decoded,
    }


def scale(turns: int, samples: int) -> tuple[float, float]:
    """Median ms per request (one turn appended, then assembled) of an uncompacted session,
    and per ``record_turn`` of the turn each request appends."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/ledger.db"
        with Ledger.open(db) as w, w.batch("scale"):
            for i in range(turns):
                w.append_turn(
                    "scale",
                    [Message.of("user", f"ask {i}"), Message.of("assistant", f"answer {i}")],
                    message_tokens=[3, 3],
                    total_tokens=6,
                    counted_by="o200k_base",
                )
        cfg = {
            "model": "gpt-4o",
            "session": "scale",
            "budget": {
                "max_tokens": 900_000,
                "context_window": 1_000_000,
                "reserve_response": 0,
                "reserve_tools": 0,
            },
            "plugins": {"ledger": {"database": db}},
        }
        out, records = [], []
        with make_assembler(cfg, plugins=[("ledger", ledger_plugin)]) as a, LedgerSession(a) as s:
            last = a.request("warm up")
            s.assemble(last)
            for i in range(samples):
                turn = [Message.of("user", f"next {i}"), Message.of("assistant", "ok")]
                gc.collect()
                records.append(clock(lambda last=last, turn=turn: s.record_turn(last, turn))[0])
                last = a.request(f"next {i}")
                gc.collect()
                out.append(clock(lambda req=last: s.assemble(req))[0])
    return statistics.median(out), statistics.median(records)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns before timing")
    parser.add_argument("--requests", type=int, default=40, help="requests timed per budget")
    parser.add_argument("--samples", type=int, default=30, help="requests timed per size")
    parser.add_argument(
        "--host-encoding",
        action="store_true",
        help="the host builds the encoding first (lamina.tokens.load_encoding), as one that "
        "counts with tiktoken itself would; default: Lamina alone in its process",
    )
    parser.add_argument(
        "--budget", type=int, help="run Part 1 at this budget only, in this process"
    )
    parser.add_argument(
        "--between",
        choices=REGIMES,
        default="collect",
        help="what runs before each timed call of Part 1: a full collection (the default, the "
        "target's figure), a collection and an eviction, nothing, a cache eviction, or a host's "
        "own work and an eviction",
    )
    parser.add_argument(
        "--keep-caches",
        dest="between",
        action="store_const",
        const="nothing",
        help="the same as --between nothing (warm caches; not the target)",
    )
    parser.add_argument(
        "--extra-calls",
        type=int,
        default=0,
        help="with --budget: a probe, this many calls to as many distinct small functions "
        "inside each of Lamina's timed requests (not a target's figure)",
    )
    args = parser.parse_args(argv)
    if args.budget is not None:
        made = counts_elsewhere(args.turns + args.requests)
        if args.host_encoding:
            load_encoding("o200k_base")
        r = agent_loop(
            args.budget,
            args.turns,
            args.requests,
            made,
            between=args.between,
            extra_calls=args.extra_calls,
        )
        print(
            f"  {args.budget // 1000}k: Lamina {r['lamina_ms']:.2f} ms, peer {r['peer_ms']:.2f} "
            f"ms, Lamina / peer {r['ratio']:.2f}x ({r['compacting_requests']} of "
            f"{args.requests} timed requests compacted; {r['decoded_turns']} turns decoded "
            f"over the run); the peer's trim_messages alone {r['trim_ms']:.2f} ms, Lamina / "
            f"trim alone {r['trim_ratio']:.2f}x",
            flush=True,
        )
        if r["compaction_ms"] is not None:
            print(
                f"  {args.budget // 1000}k: the {r['compactions']} requests of the run that "
                f"compacted (the warm-up's included): median {r['compaction_ms']:.1f} ms",
                flush=True,
            )
        return 0
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    who = "a host that built the encoding first" if args.host_encoding else "Lamina alone"
    print(
        f"Part 1: LedgerSession.assemble per request after {args.turns} turns vs "
        f"trim_messages with precomputed counts (median ms per request; {who}, each budget "
        f"in a fresh process; before each timed call: {REGIMES[args.between]})",
        flush=True,
    )
    for budget in BUDGETS:
        child = [sys.executable, __file__, "--budget", str(budget), "--turns", str(args.turns)]
        child += ["--requests", str(args.requests)]
        child += ["--host-encoding"] if args.host_encoding else []
        subprocess.run([*child, "--between", args.between], check=True)
    print("Part 2: uncompacted session, one turn appended per request (median ms per request)")
    (short, short_rec), (long, long_rec) = scale(100, args.samples), scale(10_000, args.samples)
    print(f"  100 turns {short:.2f} ms, 10,000 turns {long:.2f} ms: {long / short:.1f}x")
    print(
        f"  record_turn of the turn each request appends: 100 turns {short_rec:.2f} ms, "
        f"10,000 turns {long_rec:.2f} ms: {long_rec / short_rec:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())

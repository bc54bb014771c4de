"""Tokenizer start and throughput: Lamina's encodings and counter against raw tiktoken, in one run.

* Cold start: a fresh interpreter imports ``lamina.tokens``, makes a tokenizer and counts one
  string; timed inside the process (interpreter start excluded) and as the whole process.
  With the cache: ``LAMINA_CACHE_DIR`` holds the verified binary ranks and the small-text
  counter's table (built once, untimed); the tokenizer counts through the small-text counter,
  or, with ``small_until=None``, builds tiktoken's BPE from the cached ranks. Without:
  ``LAMINA_CACHE_DIR=""``, so the bundled base64 file is parsed and verified (and there is no
  small-text counter). Rounds interleave the three; ratios are of medians.
* Throughput: the same text counted by raw tiktoken (``len(enc.encode_ordinary(text))``) and
  by Lamina's counter (a fresh ``TokenCounter`` per round, so every text is a miss: hashing,
  the checks and tokenizing). With the ``lamina[fast]`` extra installed, also quicktok's own
  ``count`` and Lamina's tokenizer and counter counting through it (``fast_after=0``), and
  the fast counter's load in a fresh interpreter against tiktoken's. The small-text counter
  (``lamina.small_counter``) counts the same text too, its remembered pieces forgotten each
  round; with its load, that gives how many characters it can count before building tiktoken
  would have paid off (``SMALL_UNTIL`` is set below it). The text is the standard library's own source cut into
  1,200-2,400 character messages (seeded), so it is real, identical on every run of the same
  Python, and needs no network. Ratio = Lamina tokens/s over tiktoken tokens/s (goal >= 0.95),
  from the medians of the process's CPU time (counting is single-threaded, and CPU time does
  not charge one system for another process's load); wall-clock medians are shown too.

Run: ``.venv/bin/python bench/bench_tokens.py [--encoding o200k_base] [--rounds 7]
[--messages 2000] [--starts 7]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lamina.small_counter import load_small
from lamina.tokens import SMALL_UNTIL, TiktokenTokenizer, TokenCounter, load_encoding, load_fast

SEED = 20260102
MIN_CHARS, MAX_CHARS = 1_200, 2_400

#: Runs in a fresh interpreter: prints (seconds to import, load and count; the count).
COLD_START = """
import json, sys, time
started = time.perf_counter()
from lamina.tokens import SMALL_UNTIL, TiktokenTokenizer
small = None if sys.argv[2] == "tiktoken" else SMALL_UNTIL
count = TiktokenTokenizer(sys.argv[1], small_until=small).count("hello world")
print(json.dumps([time.perf_counter() - started, count]))
"""


#: Runs in a fresh interpreter: prints seconds to load argv[2] ("tiktoken", "fast", "small").
LOAD = """
import sys, time
from lamina.encodings import load_encoding, load_fast
from lamina.small_counter import load_small
started = time.perf_counter()
load = {"tiktoken": load_encoding, "fast": load_fast, "small": load_small}[sys.argv[2]]
loaded = load(sys.argv[1])
assert loaded is not None
print(time.perf_counter() - started)
"""


def load_time(encoding: str, which: str, cache: str) -> float:
    env = {**os.environ, "LAMINA_CACHE_DIR": cache}
    run = [sys.executable, "-c", LOAD, encoding, which]
    return float(subprocess.run(run, env=env, capture_output=True, check=True).stdout)


def stdlib_text(messages: int, seed: int = SEED) -> list[str]:
    """``messages`` runs of whole lines of the standard library's source, in sorted order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = iter(sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")))
    rng = random.Random(seed)
    lines: list[str] = []
    out: list[str] = []
    while len(out) < messages:
        target, chunk, size = rng.randint(MIN_CHARS, MAX_CHARS), [], 0
        while size < target:
            if not lines:
                lines = next(files).read_text("utf-8", errors="replace").splitlines(True)[::-1]
                continue
            line = lines.pop()
            chunk.append(line)
            size += len(line)
        out.append("".join(chunk))
    return out


def cold_start(encoding: str, cache: str, counter: str = "small") -> tuple[float, float]:
    """(seconds inside the process, seconds for the whole process) with ``LAMINA_CACHE_DIR``
    set to ``cache``, counting through the small-text counter or tiktoken (``counter``)."""
    env = {**os.environ, "LAMINA_CACHE_DIR": cache}
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", COLD_START, encoding, counter],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    inside, count = json.loads(out.stdout)
    if count != 2:
        raise SystemExit(f"ERROR: cold start counted {count} tokens for 'hello world'")
    return inside, wall


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, result) of ``fn()``."""
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    result = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def ms(samples: Sequence[float]) -> str:
    return f"{1000 * statistics.median(samples):8.1f} ms (min {1000 * min(samples):.1f})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="o200k_base")
    parser.add_argument("--rounds", type=int, default=7, help="throughput rounds")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--starts", type=int, default=7, help="cold starts of each kind")
    args = parser.parse_args(argv)
    name = args.encoding
    print(
        f"machine: {platform.platform()} | {platform.machine()} | "
        f"Python {platform.python_version()} | {os.cpu_count()} CPUs"
    )

    # -- cold start ------------------------------------------------------------------------
    fast = load_fast(name)
    loads: dict[str, list[float]] = {"tiktoken": [], "small": []}
    if fast:
        loads["fast"] = []
    with tempfile.TemporaryDirectory(prefix="lamina-bench-cache-") as cache:
        cold_start(name, cache)  # builds the caches (untimed)
        cold_start(name, cache, "tiktoken")
        built = sorted(p.name for p in (Path(cache) / "bpe").iterdir())
        samples: dict[str, list[tuple[float, float]]] = {
            "cache, small counter": [],
            "cache, tiktoken": [],
            "no cache": [],
        }
        for _ in range(args.starts):
            samples["cache, small counter"].append(cold_start(name, cache))
            samples["cache, tiktoken"].append(cold_start(name, cache, "tiktoken"))
            samples["no cache"].append(cold_start(name, ""))
            for which, times in loads.items():
                times.append(load_time(name, which, cache))
    base = [_python_pass() for _ in range(3)]
    print(f"\ncold start of {name} ({args.starts} interleaved starts each; cache file {built})")
    for label, runs in samples.items():
        inside, wall = [r[0] for r in runs], [r[1] for r in runs]
        print(f"  {label:20} import+load+count {ms(inside)} | whole process {ms(wall)}")
    print(f"  python -c pass       {ms(base)}")
    for one, other in (
        ("no cache", "cache, tiktoken"),
        ("cache, tiktoken", "cache, small counter"),
    ):
        inside_ratio = statistics.median(r[0] for r in samples[one]) / statistics.median(
            r[0] for r in samples[other]
        )
        wall_ratio = statistics.median(r[1] for r in samples[one]) / statistics.median(
            r[1] for r in samples[other]
        )
        print(f"  {one} / {other}: {inside_ratio:.2f}x in process, {wall_ratio:.2f}x whole")
    print(f"  load of tiktoken's {name} (cached ranks)  {ms(loads['tiktoken'])}")
    print(f"  load of the small-text counter (table)   {ms(loads['small'])}")
    if fast:
        print(f"  load of the fast counter (quicktok)      {ms(loads['fast'])}")

    # -- throughput ------------------------------------------------------------------------
    texts = stdlib_text(args.messages)
    enc = load_encoding(name)
    tok = TiktokenTokenizer(name, fast_after=None)  # tiktoken only

    def raw() -> int:
        return sum(len(enc.encode_ordinary(t)) for t in texts)

    def lamina() -> int:
        counter = TokenCounter(tok, plugin="tiktoken")
        return sum(counter.count(t) for t in texts)

    def tokenizer() -> int:
        return sum(tok.count(t) for t in texts)

    small = load_small(name)
    if small is None:
        raise SystemExit("the small-text counter is not available (regex or tiktoken version)")

    def small_count() -> int:
        assert small is not None
        small.clear()
        return sum(small.count(t) or 0 for t in texts)

    runners = {
        "tiktoken encode_ordinary": raw,
        "Lamina TokenCounter": lamina,
        "Lamina tokenizer.count": tokenizer,
        "small-text counter": small_count,
    }
    if fast is not None:
        quick = fast.tokenizer
        tok_fast = TiktokenTokenizer(name, fast_after=0)
        tok_fast.count("")
        assert tok_fast.fast

        def counter_fast() -> int:
            counter = TokenCounter(tok_fast, plugin="tiktoken")
            return sum(counter.count(t) for t in texts)

        runners["quicktok count"] = lambda: sum(quick.count(t) for t in texts)
        runners["Lamina TokenCounter, fast"] = counter_fast
        runners["Lamina tokenizer.count, fast"] = lambda: sum(tok_fast.count(t) for t in texts)
    cpu: dict[str, list[float]] = {label: [] for label in runners}
    wall: dict[str, list[float]] = {label: [] for label in runners}
    totals: dict[str, int] = {}
    for fn in runners.values():
        fn()  # warm up
    for _ in range(args.rounds):  # interleaved: background load hits each alike
        for label, fn in runners.items():
            cpu_s, wall_s, totals[label] = timed(fn)
            cpu[label].append(cpu_s)
            wall[label].append(wall_s)
    if len(set(totals.values())) != 1:
        print(f"ERROR: the counts differ: {totals}")
        return 1
    tokens = totals["tiktoken encode_ordinary"]
    chars = sum(map(len, texts))
    print(
        f"\nthroughput on {len(texts)} messages, {chars:,} characters, {tokens:,} {name} tokens "
        f"({args.rounds} interleaved rounds; CPU time, wall clock)"
    )
    reference = statistics.median(cpu["tiktoken encode_ordinary"])
    for label in runners:
        median = statistics.median(cpu[label])
        print(
            f"  {label:29} cpu {ms(cpu[label])} | wall {ms(wall[label])} | "
            f"{tokens / median / 1e6:4.2f} M tokens/s  {reference / median:.3f}x tiktoken"
        )
    extra = (statistics.median(cpu["small-text counter"]) - reference) / chars
    load = statistics.median(loads["tiktoken"]) - statistics.median(loads["small"])
    print(
        f"  the small-text counter's extra {1e9 * extra:.0f} ns per character pays for "
        f"building tiktoken after {load / extra:,.0f} characters (SMALL_UNTIL {SMALL_UNTIL:,})"
        if extra > 0
        else "  the small-text counter counted as fast as tiktoken"
    )
    return 0


def _python_pass() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())

"""Memory retrieval on LoCoMo: evidence recall within a 1,024-token memory layer, and latency.

For each question of categories 1–4 of the six LoCoMo conversations in
``../shared/data/locomo/locomo-dev.json`` (override: ``LAMINA_LOCOMO``; evaluation only, never
copied into the repository), the corpus is that conversation's dialog turns, one memory chunk per
turn (``Speaker: text``; read by ``memory_locomo.py``). The question is assembled through a real
``Assembler`` with the ``memory`` plugin (``gpt-4o``, o200k_base); recall is the fraction of the
question's evidence turns among the chunks injected, and the memory layer as rendered is checked
to fit the budget.

Latency (``--latency``): ``MemoryService.retrieve`` on a store of ``--latency-items`` chunks
(default 10,000; the conversations' turns repeated with fresh ids and sessions, noisy vectors as
``--scale`` makes them), the default settings, cache off: median, p95 and p99 over 300
questions, query embedding included when dense is on.

Scale (``--scale``, ``memory_scale.py``): a PostgreSQL store (pgserver) of ``--pg-items``
chunks (default 1,000,000) next to the in-memory store at ``--memory-items`` (100,000): p50,
p95 and p99 per query, BM25 alone and fused.

Run: ``.venv/bin/python bench/bench_memory.py [--budget 1024] [--variants bm25,fusion,...]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict
from typing import Any

import lamina_memory.plugin as memory_plugin
from lamina_memory.records import Chunk
from memory_locomo import CATEGORIES, embed_all, embed_cached, evidence, load, timed_query, turns

from lamina.testing import make_assembler

VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "defaults without the model": {"embedder": "none"},
    "bm25 (rrf_k 60)": {"embedder": "none", "neighbours": 0, "rrf_k": 60},
    "bm25": {"embedder": "none", "neighbours": 0},
    "bm25+neighbours": {"embedder": "none", "neighbours": 1},
    "fusion": {"embedder": "minilm", "neighbours": 0},
    "fusion+neighbours": {"embedder": "minilm", "neighbours": 1},
}
#: The settings ``--cv`` chooses among (dense on: the default whenever the model is present).
#: ``--grid fusion``: neighbours × RRF's k × the dense weight (``neighbour_weight`` 0.5);
#: ``--grid neighbours``: how many neighbours and what share of the hit's score they get.
GRIDS: dict[str, list[dict[str, Any]]] = {
    "fusion": [
        {"embedder": "minilm", "neighbours": n, "rrf_k": k, "dense_weight": w}
        for n in (1, 2, 3, 4)
        for k in (5, 10, 20)
        for w in (1.0, 1.5)
    ],
    "neighbours": [
        {"embedder": "minilm", "neighbours": n, "neighbour_weight": nw}
        for n in (2, 3, 4)
        for nw in (0.3, 0.5, 0.7)
    ],
}


def run_variant(
    name: str,
    extra: dict[str, Any],
    samples: list[dict[str, Any]],
    embedded: dict[str, list[Chunk]] | None,
    budget: int,
) -> dict[str, Any]:
    dense = extra.get("embedder", "auto") != "none"
    per_cat: dict[int, list[float]] = defaultdict(list)
    per_sample: dict[str, list[float]] = defaultdict(list)
    worst_tokens = 0
    token_counts: list[int] = []
    times = []
    for s in samples:
        section = {
            "store": store_url(),
            "max_tokens": budget,
            "compress": False,
            "cache_ttl": 0,
            **extra,
        }
        config = {"model": "gpt-4o", "plugins": {"memory": section}}
        asm = make_assembler(config, plugins=[("memory", memory_plugin)])
        svc = memory_plugin.SERVICES[None]
        chunks = embedded[s["sample_id"]] if dense and embedded else turns(s)
        svc.add(chunks, embed=False)
        yielded = record_blocks(svc)
        known = {c.id for c in chunks}
        enc = asm.model("gpt-4o").tokenizer
        for qa in s["qa"]:
            cat = qa.get("category")
            if cat not in CATEGORIES:
                continue
            ev = evidence(qa.get("evidence", []), known)
            if not ev:
                continue
            question = str(qa["question"])
            started = time.perf_counter()
            ctx = asm.assemble(asm.request(question, session_label="locomo"))
            times.append(time.perf_counter() - started)
            memory_text = ctx.current_message.text.split("Current time:")[0]
            tokens = enc.count(memory_text.rstrip("\n"))
            token_counts.append(tokens)
            worst_tokens = max(worst_tokens, tokens)
            injected = _items(yielded, ctx)
            per_cat[cat].append(len(ev & injected) / len(ev))
            per_sample[s["sample_id"]].append(per_cat[cat][-1])
        asm.close()
        svc.close()
    all_scores = [x for v in per_cat.values() for x in v]
    return {
        "variant": name,
        "recall": statistics.fmean(all_scores),
        "by_category": {CATEGORIES[c]: statistics.fmean(v) for c, v in sorted(per_cat.items())},
        "questions": len(all_scores),
        "per_sample": dict(per_sample),
        "max_memory_tokens": worst_tokens,
        "mean_memory_tokens": statistics.fmean(token_counts),
        "assemble_ms_median": 1000 * statistics.median(times),
    }


#: ``--store postgres``: each conversation in a fresh database on a pgserver PostgreSQL (the
#: store does the retrieval), instead of the in-memory store.
STORE = {"kind": "memory"}


def store_url() -> str:
    if STORE["kind"] == "memory":
        return "memory:"
    from lamina.testing.postgres import fresh_database, server_dsn

    return fresh_database(server_dsn(), extensions=("vector",))


def record_blocks(svc: Any) -> list[Any]:
    """Keep the blocks the memory provider yields (their provenance lists each item)."""
    seen: list[Any] = []
    original = svc.blocks

    def blocks(ctx: Any) -> Any:
        out, warnings = original(ctx)
        seen[:] = out
        return out, warnings

    svc.blocks = blocks
    return seen


def _items(yielded: list[Any], ctx: Any) -> set[str]:
    """The chunk ids injected: each kept memory block's items, from its provenance. A block
    the kernel shortened keeps only the items whose line survived."""
    kept = {b.id: b for b in ctx.report.blocks if b.layer == "memory" and b.status != "dropped"}
    out = set()
    text = ctx.current_message.text
    for block in yielded:
        report = kept.get(block.id)
        if report is None:
            continue
        lines = block.body.split("\n")
        for line, item in zip(lines, block.provenance.metadata["items"], strict=True):
            if report.hash == block.hash or f"{line}\n" in text:
                out.add(item["source_id"])
    return out


def latency(samples: list[dict[str, Any]], dense: bool, n_items: int = 10_000) -> dict[str, float]:
    """``retrieve`` times on a store of ``n_items`` chunks (the turns repeated with fresh ids and
    sessions, noisy vectors: ``memory_scale.batches``), the default settings, once untimed to
    warm the caches, then timed: median, p95 and p99 over 300 questions."""
    import numpy as np
    from lamina_memory.service import MemoryService
    from lamina_memory.settings import Settings
    from memory_scale import batches

    from lamina import LaminaConfig
    from lamina.tokens import TiktokenTokenizer

    base = [c for s in samples for c in turns(s)]
    vecs = None
    if dense:
        vecs = np.asarray(embed_cached([c.text for c in base]), dtype=np.float32)
    settings = Settings(store="memory:", cache_ttl=0, embedder="minilm" if dense else None)
    svc = MemoryService(settings, LaminaConfig())
    for part in batches(base, vecs, n_items):
        svc.add(part, embed=False)
    svc.snapshot()
    tok = TiktokenTokenizer("o200k_base")
    qs = [qa["question"] for s in samples for qa in s["qa"] if qa.get("category") in CATEGORIES]
    for q in qs[:300]:
        timed_query(svc, q, tok)
    times = sorted(timed_query(svc, q, tok) for q in qs[:300])
    svc.close()
    return {
        "items": n_items,
        "median_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * times[int(0.95 * len(times))],
        "p99_ms": 1000 * times[int(0.99 * len(times))],
    }


def label(setting: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in setting.items())


def cross_validate(
    samples: list[dict[str, Any]],
    embedded: dict[str, list[Chunk]] | None,
    budget: int,
    grid: list[dict[str, Any]],
) -> None:
    """Choose settings on three conversations, report them on the other three, both ways.

    Every setting of ``grid`` runs once on all six; a fold picks the best mean recall on its
    tuning half (the first in grid order on a tie) and reports that setting on the held-out
    half, which played no part in the choice.
    """
    ids = [str(s["sample_id"]) for s in samples]
    half = len(ids) // 2
    halves = (ids[:half], ids[half:])
    results = []
    print(f"{'setting':52s} {'+'.join(halves[0]):>24s} {'+'.join(halves[1]):>24s}   all six")
    for setting in grid:
        r = run_variant(label(setting), setting, samples, embedded, budget)
        scores = [_mean(r, h) for h in halves]
        results.append((setting, scores))
        print(
            f"{label(setting):52s} {100 * scores[0]:23.1f}% {100 * scores[1]:23.1f}%   "
            f"{100 * r['recall']:.1f}%",
            flush=True,
        )
    for tune, held in ((0, 1), (1, 0)):
        best, scores = max(results, key=lambda sr: sr[1][tune])
        print(
            f"fold: tuned on {'+'.join(halves[tune])} -> {label(best)}: "
            f"tuning half {100 * scores[tune]:.1f}%, held-out half ({'+'.join(halves[held])}) "
            f"{100 * scores[held]:.1f}%",
            flush=True,
        )


def _mean(result: dict[str, Any], ids: list[str]) -> float:
    """Mean recall over the questions of the conversations ``ids``."""
    return statistics.fmean(x for sid in ids for x in result["per_sample"].get(sid, []))


def scale(samples: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """``--scale``: see ``memory_scale.py``."""
    import numpy as np
    from memory_scale import run

    started = time.perf_counter()
    base = [c for s in samples for c in turns(s)]
    vecs = np.asarray(embed_cached([c.text for c in base]), dtype=np.float32)
    print(f"embedded {len(base)} turns in {time.perf_counter() - started:.1f}s", flush=True)
    qs = [
        str(qa["question"]) for s in samples for qa in s["qa"] if qa.get("category") in CATEGORIES
    ]
    run(
        base,
        vecs,
        qs[: args.questions],
        pg_items=args.pg_items,
        memory_items=args.memory_items,
        keep=args.pg_dir,
        freeze=args.gc_freeze,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=1024)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names")
    ap.add_argument("--latency", action="store_true", help="also time a --latency-items store")
    ap.add_argument("--latency-items", type=int, default=10_000)
    ap.add_argument(
        "--cv",
        action="store_true",
        help="cross-validate the settings: tune on three conversations, report on the other three",
    )
    ap.add_argument("--grid", choices=sorted(GRIDS), default="fusion", help="the --cv grid")
    ap.add_argument(
        "--scale",
        action="store_true",
        help="time PostgreSQL at --pg-items against the in-memory store at --memory-items",
    )
    ap.add_argument(
        "--store",
        choices=("memory", "postgres"),
        default="memory",
        help="where the recall runs keep each conversation (postgres: pgserver)",
    )
    ap.add_argument("--pg-items", type=int, default=1_000_000)
    ap.add_argument(
        "--pg-dir",
        default=None,
        help="--scale: keep PostgreSQL's data in this folder and reuse the loaded store",
    )
    ap.add_argument(
        "--memory-items", type=int, default=100_000, help="--scale: 0 times PostgreSQL alone"
    )
    ap.add_argument("--questions", type=int, default=300, help="questions timed by --scale")
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="--scale: freeze what the warm-up left (gc.freeze), as lamina serve does once ready",
    )
    args, _unknown = ap.parse_known_args()  # `./dev bench ARGS` passes every script the same args
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    samples = load()
    names = [v for v in args.variants.split(",") if v]
    embedded = None
    STORE["kind"] = args.store
    if args.scale:
        scale(samples, args)
        return
    if args.cv:
        names = []
    if args.cv or args.latency or any(VARIANTS[n].get("embedder") != "none" for n in names):
        started = time.perf_counter()
        embedded = embed_all(samples)
        print(
            f"embedded {sum(len(v) for v in embedded.values())} turns in "
            f"{time.perf_counter() - started:.1f}s",
            flush=True,
        )
    for name in names:
        r = run_variant(name, VARIANTS[name], samples, embedded, args.budget)
        cats = "  ".join(f"{k} {100 * v:.1f}%" for k, v in r["by_category"].items())
        print(
            f"{name:20s} recall {100 * r['recall']:.1f}%  [{cats}]  n={r['questions']}  "
            f"memory tokens mean {r['mean_memory_tokens']:.0f} max {r['max_memory_tokens']}  assemble {r['assemble_ms_median']:.1f} ms",
            flush=True,
        )
    if args.cv:
        cross_validate(samples, embedded, args.budget, GRIDS[args.grid])
    if args.latency:
        for dense in (False, True):
            r2 = latency(samples, dense, args.latency_items)
            print(
                f"retrieve, {r2['items']} items, default neighbours, dense={dense}: "
                f"median {r2['median_ms']:.1f} ms, p95 {r2['p95_ms']:.1f} ms, "
                f"p99 {r2['p99_ms']:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()

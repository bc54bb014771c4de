"""``bench_memory.py --scale``: retrieval latency of a PostgreSQL store holding a million chunks
(the store does the retrieval: BM25 from impact-ordered postings read best first, most of them
packed in blocks, pgvector's HNSW index) next to the in-memory store at 100,000, in one run.

The corpus is the six LoCoMo conversations' turns repeated with fresh ids (each repetition its
own sessions) and, for dense retrieval, their MiniLM vectors with a little Gaussian noise
(sigma 0.02 per dimension, renormalised) so that no two vectors are equal. PostgreSQL is a
throw-away pgserver (fsync off, ``shared_buffers`` 4 GB instead of its 128 MB, so the store's
tables and indexes can stay in PostgreSQL's own cache), loaded in batches of 5,000 rows
(``executemany``, pipelined by psycopg) with its postings, GIN and HNSW indexes dropped, then
built once (timed). ``--pg-dir DIR`` keeps the data directory in DIR and reuses the loaded
store on the next run (an older store is migrated when it opens). Each store then answers the
same 300 LoCoMo questions through ``MemoryService.retrieve`` (all five sources, the plugin's
defaults, cache off), once untimed to warm the caches and once timed: end to end (the query
embedded with one BLAS thread) and with the query vectors computed beforehand (search only).
``--memory-items 0`` times PostgreSQL alone (``--questions N``: the first N questions).
"""

from __future__ import annotations

import gc
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

from lamina_memory.records import Chunk
from memory_locomo import timed_query

BATCH = 5_000
NOISE = 0.02
#: The database ``--pg-dir`` keeps between runs.
KEPT_DB = "lamina_scale"


def batches(base: list[Chunk], vecs: Any, n: int, batch: int = BATCH) -> Iterator[list[Chunk]]:
    """``n`` chunks: ``base`` repeated with fresh ids and sessions, noisy vectors if ``vecs``."""
    import numpy as np

    rng = np.random.default_rng(0)
    for start in range(0, n, batch):
        idx = np.arange(start, min(n, start + batch))
        noisy = None
        if vecs is not None:
            noisy = vecs[idx % len(base)] + rng.normal(0, NOISE, (len(idx), vecs.shape[1]))
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        out = []
        for k, i in enumerate(idx.tolist()):
            c = base[i % len(base)]
            out.append(
                Chunk(
                    id=f"{c.id}#{i}",
                    text=c.text,
                    time=c.time,
                    session=f"{c.session}#{i // len(base)}",
                    embedding=None if noisy is None else tuple(noisy[k].tolist()),
                )
            )
        yield out


def rss_mb() -> float:
    """This process's resident memory now, in MB (Linux)."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def start_postgres(shared_buffers: str = "4GB", keep: str | None = None) -> str:
    """A pgserver PostgreSQL with ``shared_buffers`` raised (a restart) and fsync off. Under a
    temp dir, stopped and deleted when this process exits; or, with ``keep`` (``--pg-dir``), in
    that folder, stopped at exit but kept, so a later run reuses what was loaded. Returns the
    URL of the database the store lives in."""
    import atexit
    import contextlib
    import shutil
    import tempfile
    from pathlib import Path

    import psycopg
    from pgserver._commands import pg_ctl
    from pgserver.postgres_server import get_server

    from lamina.testing.postgres import fresh_database

    base = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="lamina-bench-pg-"))
    base.mkdir(parents=True, exist_ok=True)
    server = get_server(base / "data", cleanup_mode=None if keep else "delete")

    def stop() -> None:
        # After the restart below pgserver no longer knows the postmaster: stop it by hand.
        with contextlib.suppress(Exception):  # already stopped
            pg_ctl(["-m", "fast", "-w", "stop"], pgdata=server.pgdata, user=server.system_user)
        if not keep:
            server.cleanup()
            shutil.rmtree(base, ignore_errors=True)

    atexit.register(stop)
    dsn = server.get_uri()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for key, value in (
            ("shared_buffers", shared_buffers),
            ("fsync", "off"),
            ("synchronous_commit", "off"),
            ("full_page_writes", "off"),
        ):
            conn.execute(f"ALTER SYSTEM SET {key} = '{value}'")
        kept = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (KEPT_DB,)).fetchone()
    pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
    if not keep:
        return fresh_database(dsn, extensions=("vector",))
    if kept is None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{KEPT_DB}"')
        with psycopg.connect(_database(dsn, KEPT_DB), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return _database(dsn, KEPT_DB)


def _database(dsn: str, name: str) -> str:
    """``dsn`` (a ``postgresql://`` URL) with its database replaced by ``name``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def loaded(url: str) -> int:
    """How many chunks the store at ``url`` holds (0 when there is no store yet)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('lamina_meta')").fetchone() == (None,):
            return 0
        row = conn.execute("SELECT value FROM lamina_meta WHERE key = 'bm25_docs'").fetchone()
    return int(row[0]) if row else 0


def load_postgres(url: str, base: list[Chunk], vecs: Any, n: int) -> dict[str, float]:
    """Load ``n`` chunks into the store at ``url`` with its indexes dropped, then build them."""
    from lamina_memory.store import open_store

    store = open_store(url)
    db = store.db
    started = time.perf_counter()
    done = 0
    for i, part in enumerate(batches(base, vecs, n)):
        store.write(part)
        done += len(part)
        if i == 0:  # the first write made the HNSW index (the store's dimension is known)
            with db.write():
                db.execute("DROP INDEX IF EXISTS lamina_chunks_embedding_hnsw")
                db.execute("DROP INDEX IF EXISTS lamina_chunks_lexemes_gin")
                db.execute("DROP INDEX IF EXISTS lamina_chunk_postings_impact")
        if i % 20 == 0:
            print(f"  loaded {done:,} of {n:,} chunks", flush=True)
    loaded = time.perf_counter() - started
    assert store.search is not None
    with db.write():
        db.execute("SET LOCAL maintenance_work_mem = '4GB'")
        db.execute("SET LOCAL max_parallel_maintenance_workers = 1")
        t0 = time.perf_counter()
        store.search.postings.create_index()
        postings = time.perf_counter() - t0
        t0 = time.perf_counter()
        store.search.ensure()  # the GIN index
        gin = time.perf_counter() - t0
        t0 = time.perf_counter()
        if vecs is not None:
            store._vector_index(vecs.shape[1])
        hnsw = time.perf_counter() - t0
    db.execute("VACUUM ANALYZE lamina_chunks")
    db.execute("VACUUM ANALYZE lamina_chunk_postings")
    db.execute("VACUUM ANALYZE lamina_chunk_packed")
    store.close()
    return {"load_s": loaded, "gin_s": gin, "postings_s": postings, "hnsw_s": hnsw}


def time_queries(
    url: str,
    questions: list[str],
    dense: bool,
    vectors: dict[str, Any] | None,
    freeze: bool = False,
) -> dict[str, float]:
    """``retrieve`` times over ``questions`` on the store at ``url``."""
    from lamina_memory.service import MemoryService
    from lamina_memory.settings import Settings

    from lamina import LaminaConfig

    settings = Settings(store=url, cache_ttl=0, embedder="minilm" if dense else None)
    svc = MemoryService(settings, LaminaConfig())
    try:
        return _time_service(svc, questions, vectors, freeze)
    finally:
        svc.close()


class _Lookup:
    """An embedder whose query vectors were computed beforehand (search time alone)."""

    def __init__(self, real: Any, vectors: dict[str, Any]) -> None:
        self.name, self.dim, self._vectors = real.name, real.dim, vectors

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        return np.stack([self._vectors[t] for t in texts])


def run(
    base: list[Chunk],
    vecs: Any,
    questions: list[str],
    *,
    pg_items: int,
    memory_items: int,
    keep: str | None = None,
    freeze: bool = False,
) -> None:
    """Load both stores and print p50 / p95 / p99 per query, BM25 alone and fused; with
    ``keep`` (``--pg-dir``) the PostgreSQL data stays in that folder and is reused."""
    from lamina_memory.embedders import get_embedder
    from lamina_memory.service import MemoryService
    from lamina_memory.settings import Settings

    from lamina import LaminaConfig

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    qvecs = dict(zip(questions, get_embedder("minilm").embed(questions), strict=True))
    print(f"PostgreSQL: {pg_items:,} chunks, in memory: {memory_items:,}", flush=True)
    url = start_postgres(keep=keep)
    have = loaded(url)
    if have and have != pg_items:
        raise SystemExit(f"--pg-dir {keep} holds {have:,} chunks, not {pg_items:,}: use another")
    if have:
        from lamina_memory.store import open_store

        t0 = time.perf_counter()
        store = open_store(url)  # an older store's migration, if any, runs here
        store.db.execute("VACUUM ANALYZE lamina_chunk_postings")  # index-only reads
        store.db.execute("VACUUM ANALYZE lamina_chunk_packed")
        store.close()
        print(
            f"  PostgreSQL: reusing the {have:,} chunks in {keep} "
            f"(opened in {time.perf_counter() - t0:.1f} s)",
            flush=True,
        )
    else:
        built = load_postgres(url, base, vecs, pg_items)
        print(
            f"  PostgreSQL load {built['load_s']:.0f} s ({pg_items / built['load_s']:,.0f} "
            f"rows/s), GIN index {built['gin_s']:.0f} s, postings index "
            f"{built['postings_s']:.0f} s, HNSW index {built['hnsw_s']:.0f} s",
            flush=True,
        )
    mem_url = "memory:"
    results: dict[tuple[str, str], dict[str, float]] = {}
    # The in-memory store lives in its service: load it once per setting.
    for dense in (False, True):
        for mode, lookup in (("end to end", None), ("search only", qvecs)):
            if not dense and lookup is not None:
                continue
            label = ("fused" if dense else "bm25") + f", {mode}"
            results[("postgresql", label)] = time_queries(url, questions, dense, lookup, freeze)
            pg = results[("postgresql", label)]
            if memory_items <= 0:  # --memory-items 0: PostgreSQL alone
                print(
                    f"  {label:22s} PostgreSQL {pg_items:>9,}: p50 {pg['p50_ms']:6.1f} ms  "
                    f"p95 {pg['p95_ms']:6.1f}  p99 {pg['p99_ms']:6.1f}  "
                    f"(RSS {pg['rss_mb']:,.0f} MB, load average {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
                continue
            svc = MemoryService(
                Settings(
                    store=mem_url,
                    cache_ttl=0,
                    embedder="minilm" if dense else None,
                ),
                LaminaConfig(),
            )
            for part in batches(base, vecs if dense else None, memory_items):
                svc.add(part, embed=False)
            results[("memory", label)] = _time_service(svc, questions, lookup, freeze)
            svc.close()
            mem = results[("memory", label)]
            print(
                f"  {label:22s} PostgreSQL {pg_items:>9,}: p50 {pg['p50_ms']:6.1f} ms  "
                f"p95 {pg['p95_ms']:6.1f}  p99 {pg['p99_ms']:6.1f}  (RSS {pg['rss_mb']:,.0f} MB)"
                f" | memory {memory_items:>7,}: p50 {mem['p50_ms']:6.1f}  p95 {mem['p95_ms']:6.1f}"
                f"  p99 {mem['p99_ms']:6.1f}  (RSS {mem['rss_mb']:,.0f} MB)"
                f" | p95 ratio {pg['p95_ms'] / mem['p95_ms']:.2f}x",
                flush=True,
            )


def _time_service(
    svc: Any, questions: list[str], vectors: dict[str, Any] | None, freeze: bool = False
) -> dict[str, float]:
    """``retrieve`` times over ``questions`` (after a warm-up pass); with ``vectors`` the
    query vectors are looked up instead of embedded; with ``freeze`` what the warm-up left is
    frozen out of full collections (``gc.freeze``), as ``lamina serve`` does once ready."""
    from lamina.tokens import TiktokenTokenizer

    if vectors is not None and svc.embedder is not None:
        svc._embedder = _Lookup(svc.embedder, vectors)
    svc.snapshot()
    tok = TiktokenTokenizer("o200k_base")

    def one(q: str) -> float:
        return timed_query(svc, q, tok)

    for q in questions:  # warm the caches: every question once, untimed
        one(q)
    if freeze:
        gc.collect()
        gc.freeze()
    rss = rss_mb()
    times = sorted(one(q) for q in questions)
    if freeze:
        gc.unfreeze()
    return {
        "p50_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * times[int(0.95 * len(times))],
        "p99_ms": 1000 * times[int(0.99 * len(times))],
        "max_ms": 1000 * times[-1],
        "rss_mb": rss,
    }

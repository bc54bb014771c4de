"""The semantic source: BM25 over the chunks, fused with dense similarity by reciprocal rank
fusion when a query vector exists, plus the neighbouring chunks of the best hits. Over the
snapshot's chunks in memory, or asked of a store that searches them itself (PostgreSQL)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from lamina_memory.blas import one_blas_thread
from lamina_memory.index import ChunkIndex, Snapshot
from lamina_memory.pgread import Hit
from lamina_memory.query import SECTIONS, Query, fmt_time, recency
from lamina_memory.records import Candidate, Chunk

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import numpy as np

    from lamina_memory.storetypes import Store


def _rank(scores: np.ndarray, mask: np.ndarray, limit: int) -> list[int]:
    """The positions of the ``limit`` best positive scores the mask keeps, best first (ties by
    position). Partial selection first (``argpartition``), so only those are sorted."""
    import numpy as np

    idx = np.flatnonzero(mask & (scores > 0))
    if idx.size == 0 or limit <= 0:
        return []
    if idx.size > limit:
        values = scores[idx]
        kth = values[np.argpartition(-values, limit - 1)[:limit]].min()
        better = idx[values > kth]
        ties = idx[values == kth][: limit - better.size]  # the first ties by position
        idx = np.sort(np.concatenate([better, ties]))
    top = idx[np.argsort(-scores[idx], kind="stable")]
    return [int(i) for i in top]


K = TypeVar("K")


def spread(
    hits: dict[K, float],
    near: Iterable[tuple[K, K, int]],
    weight: float,
    *,
    limit: int,
    place: Callable[[K], int],
) -> dict[K, float]:
    """Each hit's score spread along the conversation: a chunk d steps from a hit (``near``:
    (hit, chunk, d), hit by hit) gains the hit's score × ``weight`` / d, on top of its own
    score when it is a hit itself and summed over every hit it neighbours, so a turn amid
    several hits rises above one next to a single hit. The ``limit`` best (ties by ``place``,
    the chunks' order), rescaled so the best is 1.0."""
    out = dict(hits)
    for key, other, d in near:
        out[other] = out.get(other, 0.0) + hits[key] * weight / d
    kept = sorted(out, key=lambda k: (-out[k], place(k)))[:limit]
    best = out[kept[0]] if kept else 0.0
    return {k: out[k] / best for k in kept} if best > 0 else {k: out[k] for k in kept}


#: How many more neighbours to ask the store for than are kept: the caller's permissions and
#: filters apply after the store's search.
NEAREST_OVERFETCH = 4


def _dense_order(idx: ChunkIndex, q: Query, mask: np.ndarray) -> list[int]:
    """Chunk positions by cosine similarity to the query, over the snapshot's matrix."""
    import numpy as np

    if idx.dim is None:
        return []
    vector = q.vector()  # (computed meanwhile on the sources' pool: waited for here)
    with one_blas_thread():
        dense = idx.vectors @ vector
    dense = np.where(idx.has_vector, dense + 1.0, 0.0)  # cosine in -1..1 → 0..2, >0
    return _rank(dense, mask, q.settings.semantic_limit)


def source_semantic(snap: Snapshot, q: Query) -> list[Candidate]:
    """BM25 over chunks, fused with dense similarity (reciprocal rank fusion) when a query
    vector exists, with optional neighbouring chunks of the best hits."""
    import numpy as np

    if q.store is not None:
        return _in_store(q.store, q)
    s, f = q.settings, q.filters
    idx = snap.index  # one view for the whole query, whatever is folded in meanwhile
    chunks = idx.chunks
    n = len(chunks)
    if n == 0:
        return []
    mask = idx.mask(q.who, f.since, f.exclude_ids)
    lex = idx.lexical.scores(q.signals.keywords)
    fused = np.zeros(n, dtype=np.float64)
    for rank, i in enumerate(_rank(lex, mask, s.semantic_limit)):
        fused[i] += 1.0 / (s.rrf_k + rank + 1)
    if q.query_vector is not None and s.dense_weight > 0:
        for rank, i in enumerate(_dense_order(idx, q, mask)):
            fused[i] += s.dense_weight / (s.rrf_k + rank + 1)
    order = _rank(fused, mask, s.semantic_limit)
    if not order:
        return []
    chosen = _spread_in_memory(idx, mask, order, fused[order] / fused[order[0]], q)
    return [_candidate(chunks[i], rel, q) for i, rel in chosen.items()]


def _spread_in_memory(
    idx: ChunkIndex, mask: np.ndarray, order: list[int], scores: np.ndarray, q: Query
) -> dict[int, float]:
    """``spread`` over the snapshot's arrays, for the hits at positions ``order`` (``scores``,
    best 1.0): the same sums in the same order as the store's path (``np.add.at`` adds the pairs
    one by one, hit by hit, then by distance and side), so both rank alike."""
    import numpy as np

    s = q.settings
    n = len(idx.chunks)
    hit = np.asarray(order, dtype=np.int64)
    out = np.zeros(n, dtype=np.float64)
    out[hit] = scores
    touched = np.zeros(n, dtype=bool)
    touched[hit] = True
    if s.neighbours:
        steps = np.array([x for d in range(1, s.neighbours + 1) for x in (-d, d)])
        pos = hit[:, None] + steps[None, :]
        share = scores[:, None] * s.neighbour_weight / np.abs(steps)[None, :]
        ok = (pos >= 0) & (pos < n)
        at = np.where(ok, pos, 0)
        ok &= mask[at] & (idx.sessions[at] == idx.sessions[hit][:, None])
        np.add.at(out, pos[ok], share[ok])
        touched[pos[ok]] = True
    kept = _rank(out, touched, s.semantic_limit)
    best = out[kept[0]]
    return {i: float(out[i] / best) for i in kept}


def _candidate(c: Chunk | Hit, relevance: float, q: Query) -> Candidate:
    s = q.settings
    text = f"[{fmt_time(c.time)}] {c.text}" if s.show_dates and c.time else c.text
    return Candidate(
        key=f"chunk:{c.id}",
        source="semantic",
        section=SECTIONS["semantic"],
        text=text,
        relevance=relevance,
        recency=recency(c.time, q.now, s.half_life_hours),
        salience=c.salience,
        kind="chunk",
        source_id=c.id,
        time=c.time,
    )


def _fused(found: tuple[list[Hit], list[Hit]], q: Query) -> tuple[dict[int, Hit], dict[int, float]]:
    """The store's BM25 and dense lists fused by reciprocal rank fusion: the best chunks by
    seq (``semantic_limit``, best first, ties by seq) with their scores (the best 1.0), and
    their hits; the other hits are let go here (fewer objects kept for the query)."""
    s = q.settings
    lexical, dense = found
    rows: dict[int, Hit] = {}  # by seq: one chunk, one seq, in either list
    fused: dict[int, float] = {}
    for weight, hits in ((1.0, [h for h in lexical if h.score > 0]), (s.dense_weight, dense)):
        for rank, h in enumerate(hits):
            rows[h.seq] = h
            fused[h.seq] = fused.get(h.seq, 0.0) + weight / (s.rrf_k + rank + 1)
    order = sorted(fused, key=lambda i: (-fused[i], i))[: s.semantic_limit]
    if not order:
        return {}, {}
    top = fused[order[0]]
    return {i: rows[i] for i in order}, {i: fused[i] / top for i in order}


def _in_store(store: Store, q: Query) -> list[Candidate]:
    """The same ranking with the store doing the search (PostgreSQL): its BM25 and HNSW
    lists, the caller's permissions and filters applied in SQL, fused here by the same
    reciprocal rank fusion, ties by the chunks' order; neighbours read around the hits."""
    s, f = q.settings, q.filters
    vector = q.query_vector if q.query_vector is not None and s.dense_weight > 0 else None
    rows, scores = _fused(
        store.search_chunks(
            q.signals.keywords,
            vector,
            who=q.who,
            since=f.since,
            exclude=f.exclude_ids,
            limit=s.semantic_limit,
            overfetch=NEAREST_OVERFETCH,
        ),
        q,
    )
    if not scores:
        return []
    order = list(scores)
    near: Iterable[tuple[int, int, int]] = ()
    if s.neighbours:
        near = zip(
            *store.chunks_around(
                [(i, rows[i].session) for i in order],
                s.neighbours,
                who=q.who,
                since=f.since,
                exclude=f.exclude_ids,
            ),
            strict=True,
        )
    chosen = spread(scores, near, s.neighbour_weight, limit=s.semantic_limit, place=int)
    # Only the neighbours kept are read in full, in one statement (the caller's permissions
    # and filters applied again: one that stopped counting meanwhile is left out).
    missing = [i for i in chosen if i not in rows]
    if missing:
        for h in store.chunks_at(missing, who=q.who, since=f.since, exclude=f.exclude_ids):
            rows[h.seq] = h
    return [_candidate(rows[i], rel, q) for i, rel in chosen.items() if i in rows]

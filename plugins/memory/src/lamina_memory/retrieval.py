"""The five retrieval sources of seed 003, the weighted score, and greedy selection in a budget.

Each source turns a snapshot and the query signals into scored ``Candidate`` s; ``select``
gives each source its share of the budget, fills what is left by score, and returns what did
not fit (the compression candidates).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from attrs import evolve, frozen

from lamina_memory.index import Snapshot
from lamina_memory.records import Candidate, visible
from lamina_memory.settings import Settings
from lamina_memory.signals import QuerySignals, analyse

if TYPE_CHECKING:
    import numpy as np

SECTIONS = {
    "recent": "Recent Activity",
    "semantic": "Relevant Content",
    "entities": "Known Entities",
    "relations": "Relationships",
    "patterns": "Applicable Patterns",
    "additional": "Additional Context",
}
SECTION_ORDER = tuple(SECTIONS.values())


@frozen(kw_only=True)
class Filters:
    """What the caller excludes: older than ``since``, other event/entity types, given ids."""

    since: datetime | None = None
    event_types: tuple[str, ...] = ()
    entity_types: tuple[str, ...] = ()
    exclude_ids: frozenset[str] = frozenset()


@frozen(kw_only=True)
class Query:
    """Everything a source needs for one request."""

    signals: QuerySignals
    session: str
    now: datetime
    who: frozenset[str]
    filters: Filters
    settings: Settings
    query_vector: Any = None  # np.ndarray | None
    #: The store's own nearest-neighbour search (pgvector), when it has one: ``(vector, k)``
    #: → ``[(chunk id, cosine similarity)]``. Without it, dense search runs over the snapshot.
    nearest: Callable[[Any, int], list[tuple[str, float]]] | None = None


def recency(when: datetime | None, now: datetime, half_life_hours: float) -> float:
    """Exponential decay: 1.0 now, 0.5 one half-life ago; undated memories score 0."""
    if when is None:
        return 0.0
    age = max(0.0, (now - when).total_seconds() / 3600.0)
    return math.pow(0.5, age / half_life_hours)


def _overlap(keywords: Sequence[str], text: str) -> float:
    if not keywords:
        return 0.0
    terms = set(analyse(text))
    return sum(1 for k in keywords if k in terms) / len(keywords)


def _fmt_time(when: datetime | None) -> str:
    return "" if when is None else when.strftime("%Y-%m-%d %H:%M")


# -- sources -------------------------------------------------------------------------------


def source_recent(snap: Snapshot, q: Query) -> list[Candidate]:
    """This session's latest events, plus highlights of the most recent other sessions."""
    s, f = q.settings, q.filters
    ok = [
        e
        for e in snap.events
        if visible(e.acl, q.who)
        and e.id not in f.exclude_ids
        and (f.since is None or e.time >= f.since)
        and (not f.event_types or e.type in f.event_types)
    ]
    mine = [e for e in ok if e.session == q.session][-s.recent_limit :] if s.recent_limit else []
    others: list[str] = []
    for e in reversed(ok):
        if e.session != q.session and e.session not in others:
            others.append(e.session)
    recent_others = set(others[: s.recent_sessions])
    highlights = [
        e
        for e in ok
        if e.session in recent_others
        and (e.salience >= s.highlight_salience or e.outcome in ("failure", "error"))
    ][-s.recent_limit :]
    out = []
    for e in [*mine, *highlights]:
        rel = _overlap(q.signals.keywords, e.text)
        if e.type in q.signals.event_types:
            rel = min(1.0, rel + 0.25)
        tag = e.type if e.session == q.session else f"{e.type}, session {e.session}"
        outcome = f" → {e.outcome}" if e.outcome else ""
        out.append(
            Candidate(
                key=f"event:{e.id}",
                source="recent",
                section=SECTIONS["recent"],
                text=f"[{_fmt_time(e.time)}] ({tag}) {e.text}{outcome}",
                relevance=rel,
                recency=recency(e.time, q.now, s.half_life_hours),
                salience=e.salience,
                kind="event",
                source_id=e.id,
                time=e.time,
            )
        )
    return out


def _rank(scores: np.ndarray, mask: np.ndarray, limit: int) -> list[int]:
    import numpy as np

    idx = np.flatnonzero(mask & (scores > 0))
    if idx.size == 0:
        return []
    top = idx[np.argsort(-scores[idx], kind="stable")[:limit]]
    return [int(i) for i in top]


#: How many more neighbours to ask the store for than are kept: the caller's permissions and
#: filters apply after the store's search.
NEAREST_OVERFETCH = 4


def _dense_order(snap: Snapshot, q: Query, mask: np.ndarray) -> list[int]:
    """Chunk positions by cosine similarity to the query: the store's own index (pgvector)
    when it has one, else the snapshot's matrix."""
    import numpy as np

    limit = q.settings.semantic_limit
    if q.nearest is not None:
        hits = q.nearest(q.query_vector, limit * NEAREST_OVERFETCH)
        order = [snap.chunk_pos[cid] for cid, _ in hits if cid in snap.chunk_pos]
        return [i for i in order if mask[i]][:limit]
    if snap.dim is None:
        return []
    dense = snap.vectors @ q.query_vector
    dense = np.where(snap.has_vector, dense + 1.0, 0.0)  # cosine in -1..1 → 0..2, >0
    return _rank(dense, mask, limit)


def source_semantic(snap: Snapshot, q: Query) -> list[Candidate]:
    """BM25 over chunks, fused with dense similarity (reciprocal rank fusion) when a query
    vector exists, with optional neighbouring chunks of the best hits."""
    import numpy as np

    s, f = q.settings, q.filters
    n = len(snap.chunks)
    if n == 0:
        return []
    mask = snap.chunk_mask(q.who, f.since, f.exclude_ids)
    lex = snap.lexical.scores(q.signals.keywords)
    fused = np.zeros(n, dtype=np.float64)
    for rank, i in enumerate(_rank(lex, mask, s.semantic_limit)):
        fused[i] += 1.0 / (s.rrf_k + rank + 1)
    if q.query_vector is not None and s.dense_weight > 0:
        for rank, i in enumerate(_dense_order(snap, q, mask)):
            fused[i] += s.dense_weight / (s.rrf_k + rank + 1)
    order = _rank(fused, mask, s.semantic_limit)
    if not order:
        return []
    top = fused[order[0]]
    chosen: dict[int, float] = {i: float(fused[i] / top) for i in order}
    if s.neighbours:
        for i in list(order):
            c = snap.chunks[i]
            for d in range(1, s.neighbours + 1):
                for j in (i - d, i + d):
                    if 0 <= j < n and mask[j] and snap.chunks[j].session == c.session:
                        near = chosen[i] * 0.5 / d
                        if near > chosen.get(j, 0.0):
                            chosen[j] = near
    out = []
    for i, rel in chosen.items():
        c = snap.chunks[i]
        text = f"[{_fmt_time(c.time)}] {c.text}" if s.show_dates and c.time else c.text
        out.append(
            Candidate(
                key=f"chunk:{c.id}",
                source="semantic",
                section=SECTIONS["semantic"],
                text=text,
                relevance=rel,
                recency=recency(c.time, q.now, s.half_life_hours),
                salience=c.salience,
                kind="chunk",
                source_id=c.id,
                time=c.time,
            )
        )
    return out


def _entity_ok(e: Any, q: Query) -> bool:
    f = q.filters
    return (
        visible(e.acl, q.who)
        and e.id not in f.exclude_ids
        and (not f.entity_types or e.type in f.entity_types)
    )


def source_entities(snap: Snapshot, q: Query) -> list[Candidate]:
    """Mentioned entities (score ×2) and the most salient ones."""
    named = [snap.entity_by_name.get(n.lower()) for n in q.signals.entities]
    mentioned = {e.id for e in named if e is not None}
    salient = sorted(snap.entities, key=lambda e: (-e.salience, e.id))
    picked = [e for e in named if e is not None]
    picked += [e for e in salient if _entity_ok(e, q)][: q.settings.salient_entities]
    out: dict[str, Candidate] = {}
    for e in picked:
        if e.id in out or not _entity_ok(e, q):
            continue
        props = "; ".join(f"{k}: {v}" for k, v in sorted(e.properties.items()))
        boost = 2.0 if e.id in mentioned else 1.0
        out[e.id] = Candidate(
            key=f"entity:{e.id}",
            source="entities",
            section=SECTIONS["entities"],
            text=f"{e.name} ({e.type})" + (f": {props}" if props else ""),
            relevance=min(1.0, e.salience * boost),
            salience=min(1.0, e.salience * boost),
            kind="entity",
            source_id=e.id,
        )
    return list(out.values())


def source_relations(snap: Snapshot, q: Query) -> list[Candidate]:
    """Breadth-first from the mentioned entities up to ``relation_depth`` hops; an edge found at
    depth d scores its weight halved d-1 times."""
    starts = [snap.entity_by_name.get(n.lower()) for n in q.signals.entities]
    frontier = [e.id for e in starts if e is not None and _entity_ok(e, q)]
    seen_nodes = set(frontier)
    out: dict[str, Candidate] = {}
    for depth in range(1, q.settings.relation_depth + 1):
        nxt = []
        for node in frontier:
            for r in snap.adjacency.get(node, ()):
                if r.id in out or not visible(r.acl, q.who) or r.id in q.filters.exclude_ids:
                    continue
                a, b = snap.entity_by_id.get(r.source), snap.entity_by_id.get(r.target)
                if a is None or b is None or not (_entity_ok(a, q) and _entity_ok(b, q)):
                    continue
                score = r.weight * 0.5 ** (depth - 1)
                out[r.id] = Candidate(
                    key=f"relation:{r.id}",
                    source="relations",
                    section=SECTIONS["relations"],
                    text=f"{a.name} —{r.type}→ {b.name}",
                    relevance=score,
                    salience=score,
                    kind="relation",
                    source_id=r.id,
                )
                other = r.target if r.source == node else r.source
                if other not in seen_nodes:
                    seen_nodes.add(other)
                    nxt.append(other)
        frontier = nxt
    return list(out.values())


def source_patterns(snap: Snapshot, q: Query) -> list[Candidate]:
    """Patterns whose keywords or intent match the query, ranked by success rate."""
    keys = set(q.signals.keywords)
    out = []
    for p in snap.patterns:
        if not visible(p.acl, q.who) or p.id in q.filters.exclude_ids:
            continue
        pkeys = {k for kw in p.keywords for k in analyse(kw)}
        hits = len(keys & pkeys) / len(pkeys) if pkeys else 0.0
        intent = 1.0 if p.intent == q.signals.intent and p.intent != "other" else 0.0
        if hits == 0 and intent == 0:
            continue
        match = min(1.0, hits + 0.5 * intent)
        out.append(
            Candidate(
                key=f"pattern:{p.id}",
                source="patterns",
                section=SECTIONS["patterns"],
                text=f"{p.text} (worked {p.successes}/{p.applications})",
                relevance=match * p.success_rate,
                salience=p.success_rate,
                kind="pattern",
                source_id=p.id,
            )
        )
    return out


SOURCE_FUNCS: dict[str, Callable[[Snapshot, Query], list[Candidate]]] = {
    "recent": source_recent,
    "semantic": source_semantic,
    "entities": source_entities,
    "relations": source_relations,
    "patterns": source_patterns,
}


# -- scoring and selection ---------------------------------------------------------------------


def score(c: Candidate, weights: tuple[float, float, float]) -> float:
    """The weighted final score: recency, relevance, salience (weights sum to 1)."""
    w_rec, w_rel, w_sal = weights
    return w_rec * c.recency + w_rel * c.relevance + w_sal * c.salience


@frozen(kw_only=True)
class Selection:
    """What fits (in injection order) and what did not (best first)."""

    chosen: tuple[Candidate, ...]
    overflow: tuple[Candidate, ...]
    used: int
    budget: int


def select(
    candidates: dict[str, list[Candidate]],
    *,
    budget: int,
    shares: dict[str, float],
    weights: tuple[float, float, float],
    cost: Callable[[Candidate, bool], int],
) -> Selection:
    """Greedy selection: each source first fills its share (best score first, skipping what
    does not fit), then the remaining budget goes to the best leftovers of any source.

    ``cost(candidate, first_in_section)`` is the candidate's rendered size in tokens (the
    section title is charged to the first item of a section).
    """
    points = {c.key: score(c, weights) for cands in candidates.values() for c in cands}
    scored = {
        src: sorted(cands, key=lambda c: (-points[c.key], c.key))
        for src, cands in candidates.items()
    }
    taken: dict[str, Candidate] = {}
    sections: set[str] = set()
    used = 0

    def take(c: Candidate, limit: int) -> int:
        first = c.section not in sections
        t = cost(c, first)
        if used + t > budget or t > limit:
            return 0
        taken[c.key] = evolve(c, score=points[c.key], tokens=t)
        sections.add(c.section)
        return t

    total_share = sum(shares.get(s, 0.0) for s in scored) or 1.0
    for src, cands in scored.items():
        allowance = int(budget * shares.get(src, 0.0) / total_share)
        spent = 0
        for c in cands:
            if c.key in taken:
                continue
            t = take(c, allowance - spent)
            spent += t
            used += t
    pool = sorted(
        (c for cands in scored.values() for c in cands if c.key not in taken),
        key=lambda c: (-points[c.key], c.key),
    )
    overflow = []
    for c in pool:
        if c.key in taken:
            continue
        if budget - used <= 0:
            overflow.append(c)
            continue
        t = take(c, budget - used)
        if t:
            used += t
        else:
            overflow.append(c)
    order = {name: i for i, name in enumerate(SECTION_ORDER)}
    chosen = sorted(taken.values(), key=lambda c: (order.get(c.section, 99), -c.score, c.key))
    return Selection(chosen=tuple(chosen), overflow=tuple(overflow), used=used, budget=budget)

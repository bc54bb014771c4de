"""The retrieval sources of the memory framework design: recent events, semantic search
(``semantic.py``), entities, relations and patterns. Each turns a snapshot and the query into
scored ``Candidate`` s; ``SOURCE_FUNCS`` is what the service runs, one thread per source.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lamina_memory.index import Snapshot
from lamina_memory.query import SECTIONS, Filters, Query, fmt_time, overlap, recency
from lamina_memory.records import Candidate, visible
from lamina_memory.semantic import source_semantic
from lamina_memory.signals import analyse

__all__ = [
    "SOURCE_FUNCS",
    "Filters",
    "Query",
    "recency",
    "source_entities",
    "source_patterns",
    "source_recent",
    "source_relations",
    "source_semantic",
]


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
        and (f.task_id is None or e.task == f.task_id)
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
        rel = overlap(q.signals.keywords, e.text)
        if e.type in q.signals.event_types:
            rel = min(1.0, rel + 0.25)
        tag = e.type if e.session == q.session else f"{e.type}, session {e.session}"
        outcome = f" → {e.outcome}" if e.outcome else ""
        out.append(
            Candidate(
                key=f"event:{e.id}",
                source="recent",
                section=SECTIONS["recent"],
                text=f"[{fmt_time(e.time)}] ({tag}) {e.text}{outcome}",
                relevance=rel,
                recency=recency(e.time, q.now, s.half_life_hours),
                salience=e.salience,
                kind="event",
                source_id=e.id,
                time=e.time,
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

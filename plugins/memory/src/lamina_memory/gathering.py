"""One retrieval's candidates and their selection (``MemoryService.retrieve``): every enabled
source run concurrently (``gather``), then the task frames and the caller's additional context
added and the whole selected within the budget (``choose``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from datetime import datetime
from typing import Any

import attrs

from lamina_memory.blas import one_blas_thread
from lamina_memory.embedders import Embedder
from lamina_memory.formats import apply_formats
from lamina_memory.index import Snapshot
from lamina_memory.query import SECTIONS, Filters, Query
from lamina_memory.records import Candidate
from lamina_memory.retrieval import SOURCE_FUNCS
from lamina_memory.selection import Selection, select
from lamina_memory.settings import Settings
from lamina_memory.signals import extract
from lamina_memory.storetypes import Store


def gather(
    pool: Executor,
    snap: Snapshot,
    query_text: str,
    *,
    settings: Settings,
    embedder: Embedder | None,
    store: Store,
    session: str,
    now: datetime,
    who: frozenset[str],
    filters: Filters,
    sources: tuple[str, ...] | None,
    plugin: str,
) -> tuple[dict[str, list[Candidate]], list[str]]:
    """Every enabled source's candidates, the sources run concurrently on ``pool``; a failing
    source (other than a required one) drops out with a warning."""
    s = settings
    vector = None
    if embedder is not None:  # first on the pool: the sources start while it is computed
        vector = pool.submit(_embedded, embedder, query_text)
    q = Query(
        signals=extract(query_text, [e.name for e in snap.entities]),
        session=session,
        now=now,
        who=who,
        filters=filters,
        settings=s,
        query_vector=vector,
        store=store if snap.chunks_in_store else None,
    )
    enabled = [x for x in s.sources if sources is None or x in sources]
    futures = {name: pool.submit(SOURCE_FUNCS[name], snap, q) for name in enabled}
    found: dict[str, list[Candidate]] = {}
    warnings: list[str] = []
    for name, fut in futures.items():
        try:
            found[name] = fut.result()
        except Exception as exc:
            if name in s.required_sources:
                raise
            warnings.append(
                f"plugin {plugin!r}: memory source {name!r} failed "
                f"({type(exc).__name__}: {exc}); the other sources were still injected"
            )
    return found, warnings


def _embedded(embedder: Embedder, text: str) -> Any:
    with one_blas_thread():
        return embedder.embed([text])[0]


def choose(
    found: dict[str, list[Candidate]],
    *,
    settings: Settings,
    frame_lines: Sequence[tuple[str, float]],
    additional: str | None,
    budget: int,
    weights: tuple[float, float, float],
    cost: Callable[[Candidate, bool], int],
) -> Selection:
    """The sources' candidates in their formats, plus the task frames (each line its share of
    the budget, taken from the sources' shares) and ``additional`` (the caller's own text),
    both in the Additional Context section, selected within ``budget``; ``considered`` counts
    each source's candidates."""
    s = settings
    found = apply_formats(found, s.format, s.formats)
    shares = {name: s.share_of(name) for name in found}
    if frame_lines:
        frame_share = sum(share for _, share in frame_lines)
        shares = {k: v * (1 - frame_share) for k, v in shares.items()}
        shares["frames"] = frame_share
        found["frames"] = [
            Candidate(
                key=f"frame:{i}",
                source="frames",
                section=SECTIONS["additional"],
                text=line,
                relevance=1.0,
                salience=1.0,
                kind="event",
                source_id=f"frame-{i}",
            )
            for i, (line, _share) in enumerate(frame_lines)
        ]
    if additional and additional.strip():
        found["custom"] = [
            Candidate(
                key="custom:0",
                source="custom",
                section=SECTIONS["additional"],
                text=additional,
                relevance=1.0,
                salience=1.0,
                kind="event",
                source_id="additional-context",
            )
        ]
        shares["custom"] = 1.0
    selection = select(found, budget=budget, shares=shares, weights=weights, cost=cost)
    return attrs.evolve(selection, considered={name: len(c) for name, c in found.items()})

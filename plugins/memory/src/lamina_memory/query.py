"""What one request asks of retrieval: its signals, caller, filters and settings, and the
rules every source shares (section titles, recency decay, keyword overlap)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import TYPE_CHECKING, Any

from attrs import frozen

from lamina_memory.settings import Settings
from lamina_memory.signals import QuerySignals, analyse

if TYPE_CHECKING:
    from lamina_memory.storetypes import Store

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
    #: Only events of this task (``EpisodicEvent.task``), as the design's stack-aware assembly
    #: asks for the current frame's.
    task_id: str | None = None


@frozen(kw_only=True)
class Query:
    """Everything a source needs for one request."""

    signals: QuerySignals
    session: str
    now: datetime
    who: frozenset[str]
    filters: Filters
    settings: Settings
    #: The query's embedding (np.ndarray), a ``Future`` of it while it is being computed
    #: (the sources start meanwhile: ``vector`` waits for it), or ``None`` without an embedder.
    query_vector: Any = None
    #: The store that ranks the chunks itself (PostgreSQL), when it does: the semantic source
    #: asks it instead of the snapshot, which then holds no chunk.
    store: Store | None = None

    def vector(self) -> Any:
        """The query's embedding (waiting for it if it is still being computed), or None."""
        return resolved(self.query_vector)


def resolved(vector: Any) -> Any:
    """``vector`` itself, or its value when it is a ``Future`` (waiting for it)."""
    return vector.result() if isinstance(vector, Future) else vector


def recency(when: datetime | None, now: datetime, half_life_hours: float) -> float:
    """Exponential decay: 1.0 now, 0.5 one half-life ago; undated memories score 0."""
    if when is None:
        return 0.0
    age = max(0.0, (now - when).total_seconds() / 3600.0)
    return math.pow(0.5, age / half_life_hours)


def overlap(keywords: Sequence[str], text: str) -> float:
    """The share of ``keywords`` among ``text``'s analysed terms."""
    if not keywords:
        return 0.0
    terms = set(analyse(text))
    return sum(1 for k in keywords if k in terms) / len(keywords)


def fmt_time(when: datetime | None) -> str:
    """A memory's time as items show it (minutes, no zone); empty when undated."""
    return "" if when is None else when.strftime("%Y-%m-%d %H:%M")

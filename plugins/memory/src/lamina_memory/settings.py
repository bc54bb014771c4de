"""``[plugins.memory]``: where memories live, how they are scored and how much may be injected."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen, validators

from lamina import inert_without_section
from lamina_memory.formats import FORMATS

SOURCES = ("recent", "semantic", "entities", "relations", "patterns")
DEFAULT_SHARES = {
    "recent": 0.25,
    "semantic": 0.40,
    "entities": 0.10,
    "relations": 0.10,
    "patterns": 0.15,
}
#: (recency, relevance, salience) weights of each scoring strategy.
STRATEGIES: dict[str, tuple[float, float, float]] = {
    "balanced": (0.3, 0.5, 0.2),
    "relevance": (0.05, 0.9, 0.05),
    "recency": (0.6, 0.3, 0.1),
}


def _shares(_inst: object, _attr: object, value: dict[str, float]) -> None:
    unknown = sorted(set(value) - set(SOURCES))
    if unknown:
        raise ValueError(f"unknown sources {unknown}; known: {', '.join(SOURCES)}")
    bad = {k: v for k, v in value.items() if not 0.0 <= v <= 1.0}
    if bad:
        raise ValueError(f"shares must be within 0.0..1.0, got {bad}")


def _sources(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    unknown = [v for v in value if v not in SOURCES]
    if unknown:
        raise ValueError(f"unknown sources {unknown}; known: {', '.join(SOURCES)}")


def _format(_inst: object, attr: Any, value: str) -> None:
    if value not in FORMATS:
        raise ValueError(f"{attr.name}: unknown format {value!r}; known: {', '.join(FORMATS)}")


def _formats(_inst: object, _attr: object, value: dict[str, str]) -> None:
    unknown = sorted(set(value) - set(SOURCES))
    if unknown:
        raise ValueError(f"formats: unknown sources {unknown}; known: {', '.join(SOURCES)}")
    bad = {k: v for k, v in value.items() if v not in FORMATS}
    if bad:
        raise ValueError(f"formats: unknown formats {bad}; known: {', '.join(FORMATS)}")


def _weights(_inst: object, _attr: object, value: tuple[float, ...] | None) -> None:
    if value is not None and (len(value) != 3 or any(v < 0 for v in value) or sum(value) <= 0):
        raise ValueError("weights are three non-negative numbers: recency, relevance, salience")


@inert_without_section
@frozen(kw_only=True)
class Settings:
    """Every key of ``[plugins.memory]`` (see the plugin's README for the reference table).
    Without the section the plugin is inert: the kernel skips its layer provider."""

    store: str = "sqlite:///.lamina/memory.db"
    import_files: tuple[str, ...] = ()
    max_tokens: int = field(default=1024, validator=validators.ge(0))
    sources: tuple[str, ...] = field(default=SOURCES, validator=_sources)
    required_sources: tuple[str, ...] = field(default=("semantic",), validator=_sources)
    shares: dict[str, float] = field(factory=dict, validator=_shares)
    strategy: str = field(default="balanced", validator=validators.in_(tuple(STRATEGIES)))
    weights: tuple[float, ...] | None = field(default=None, validator=_weights)
    half_life_hours: float = field(default=24.0, validator=validators.gt(0))
    recent_limit: int = field(default=50, validator=validators.ge(0))
    recent_sessions: int = field(default=5, validator=validators.ge(0))
    highlight_salience: float = field(default=0.7, validator=[validators.ge(0), validators.le(1)])
    semantic_limit: int = field(default=200, validator=validators.ge(1))
    salient_entities: int = field(default=10, validator=validators.ge(0))
    relation_depth: int = field(default=2, validator=validators.ge(0))
    #: ``auto``: the built-in ``minilm`` when its model is installed, else BM25 alone with one
    #: warning in each report; ``none`` (or None): BM25 alone, silently; else a registered name.
    embedder: str | None = "auto"
    embedder_options: dict[str, Any] = field(factory=dict)
    #: Where dense search runs: ``store`` uses the store's own index when it has one
    #: (pgvector's ``<=>`` on PostgreSQL), ``memory`` always the in-memory matrix.
    dense_search: str = field(default="store", validator=validators.in_(("store", "memory")))
    dense_weight: float = field(default=1.0, validator=validators.ge(0))
    rrf_k: int = field(default=5, validator=validators.ge(1))
    neighbours: int = field(default=3, validator=validators.ge(0))
    #: A chunk d steps from a hit (same session) gains the hit's relevance × this / d, summed
    #: over the hits it neighbours and added to its own (then rescaled: the best is 1.0).
    neighbour_weight: float = field(default=0.5, validator=[validators.gt(0), validators.le(1)])
    show_dates: bool = False
    #: The Cortex draft's injection format of the whole layer, and per source.
    format: str = field(default="raw", validator=_format)
    formats: dict[str, str] = field(factory=dict, validator=_formats)
    since: str | None = None
    event_types: tuple[str, ...] = ()
    entity_types: tuple[str, ...] = ()
    exclude_ids: tuple[str, ...] = ()
    cache_ttl: float = field(default=30.0, validator=validators.ge(0))
    compress: bool = True
    compress_min_tokens: int = field(default=48, validator=validators.ge(1))
    frames_budget: bool = True

    def share_of(self, source: str) -> float:
        return self.shares.get(source, DEFAULT_SHARES[source])

    @property
    def score_weights(self) -> tuple[float, float, float]:
        w = self.weights or STRATEGIES[self.strategy]
        total = sum(w)
        return (w[0] / total, w[1] / total, w[2] / total)

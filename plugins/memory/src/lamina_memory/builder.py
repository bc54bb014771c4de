"""The memory framework design's context builder: ``ContextBuilder.build(request) -> Context``,
``estimate_tokens``, ``compress`` and ``update_context(event)``, with the design's request and
result fields in snake_case. The ``memory`` layer provider is this builder underneath (one
code path): the provider turns its ``ProviderContext`` into a ``ContextRequest`` and injects the
``Context``'s blocks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from attrs import evolve, field, frozen

from lamina import Block, Formatter, Tokenizer
from lamina_memory.formats import summarize
from lamina_memory.query import SECTIONS, Filters, fmt_time, recency
from lamina_memory.records import Candidate, EpisodicEvent
from lamina_memory.selection import Selection
from lamina_memory.settings import STRATEGIES

if TYPE_CHECKING:
    from lamina_memory.service import MemoryService

#: A component's ``type`` for each retrieval source (the design's names).
COMPONENT_TYPES = {
    "recent": "recent",
    "semantic": "semantic",
    "entities": "entity",
    "relations": "relation",
    "patterns": "pattern",
}


@frozen(kw_only=True)
class ContextRequest:
    """What to build: the query, the session, the budget, and optionally a strategy (a name of
    ``STRATEGIES``, or explicit recency/relevance/salience weights), the caller's own
    additional context, filters, who asks (their principals) and the task whose events count."""

    query: str
    session_id: str
    max_tokens: int
    strategy: str | tuple[float, float, float] | None = None
    additional_context: str | None = None
    filters: Filters = field(factory=Filters)
    principals: frozenset[str] = frozenset()
    now: datetime | None = None
    sources: tuple[str, ...] | None = None


@frozen(kw_only=True)
class ContextComponent:
    """One memory in the context: its type, source id, text, tokens and relevance."""

    type: str
    source: str
    content: str
    tokens: int
    relevance_score: float


@frozen(kw_only=True)
class ContextMetadata:
    """For debugging: what was asked, how much each source considered, how long it took."""

    query: str
    events_considered: int
    entities_considered: int
    chunks_searched: int
    assembly_time_ms: float


@frozen(kw_only=True)
class Context:
    """The built context: its text as the layer's formatter renders it, its components, its
    token count, whether anything was left out, the strategy's weights, and the blocks the
    layer provider injects (plus any warnings for the report)."""

    content: str
    components: tuple[ContextComponent, ...]
    token_count: int
    truncated: bool
    strategy: tuple[float, float, float]
    metadata: ContextMetadata
    blocks: tuple[Block, ...] = ()
    warnings: tuple[str, ...] = ()


def _weights(
    strategy: str | tuple[float, float, float] | None,
) -> tuple[float, float, float] | None:
    if strategy is None:
        return None
    w = STRATEGIES[strategy] if isinstance(strategy, str) else strategy
    total = sum(w)
    return (w[0] / total, w[1] / total, w[2] / total)


class ContextBuilder:
    """Builds memory context with one tokenizer and the memory layer's formatter."""

    def __init__(
        self, service: MemoryService, *, tokenizer: Tokenizer, formatter: Formatter | str
    ) -> None:
        self.service = service
        self.tokenizer = tokenizer
        self.formatter = formatter

    def estimate_tokens(self, content: str) -> int:
        """``content``'s tokens with the builder's tokenizer (an exact count, not len/4)."""
        return self.tokenizer.count(content)

    def compress(self, content: str, max_tokens: int) -> str:
        """``content`` within ``max_tokens``: its lines (one memory each) kept in order while
        they fit, each cut to its first sentence when whole it would not; if not even that
        fits, the first line's leading words. Empty only when not one word fits."""
        count = self.estimate_tokens
        if count(content) <= max_tokens:
            return content
        kept: list[str] = []
        for line in (x for x in content.split("\n") if x.strip()):
            for version in (line, summarize(line)):
                if count("\n".join([*kept, version])) <= max_tokens:
                    kept.append(version)
                    break
        if kept:
            return "\n".join(kept)
        words: list[str] = []
        for word in content.split():
            if count(" ".join([*words, word, "…"])) > max_tokens:
                break
            words.append(word)
        return " ".join([*words, "…"]) if words else ""

    def build(self, request: ContextRequest) -> Context:
        """Retrieve, select within ``max_tokens`` as rendered, and lay out the blocks."""
        started = time.perf_counter()
        svc = self.service
        weights = _weights(request.strategy) or svc.settings.score_weights
        if request.max_tokens <= 0 or not request.query.strip():
            return self._context(request, None, [], [], weights, started)
        selection, warnings = svc.retrieve(
            text=request.query,
            session=request.session_id,
            now=request.now or datetime.now(UTC),
            who=request.principals,
            filters=request.filters,
            budget=request.max_tokens,
            tokenizer=self.tokenizer,
            fmt=self.formatter,
            sources=request.sources,
            weights=weights,
            additional=request.additional_context,
        )
        layout = svc.layout(self.formatter, self.tokenizer)
        blocks = layout.fit(
            selection,
            compress=svc.settings.compress,
            compress_min=svc.settings.compress_min_tokens,
        )
        return self._context(request, selection, blocks, warnings, weights, started)

    def _context(
        self,
        request: ContextRequest,
        selection: Selection | None,
        blocks: Sequence[Block],
        warnings: Sequence[str],
        weights: tuple[float, float, float],
        started: float,
    ) -> Context:
        layout = self.service.layout(self.formatter, self.tokenizer)
        shown = {item["id"] for b in blocks for item in b.provenance.metadata.get("items", ())}
        chosen = [c for c in (selection.chosen if selection else ()) if c.key in shown]
        considered = selection.considered if selection else {}
        return Context(
            content=layout.render(blocks),
            components=tuple(_component(c) for c in chosen),
            token_count=layout.tokens(blocks),
            truncated=bool(
                selection and (selection.overflow or len(chosen) < len(selection.chosen))
            ),
            strategy=weights,
            metadata=ContextMetadata(
                query=request.query,
                events_considered=considered.get("recent", 0),
                entities_considered=considered.get("entities", 0),
                chunks_searched=selection.searched if selection else 0,
                assembly_time_ms=1000 * (time.perf_counter() - started),
            ),
            blocks=tuple(blocks),
            warnings=tuple(warnings),
        )

    def update_context(
        self, existing: Context, event: EpisodicEvent, *, max_tokens: int | None = None
    ) -> Context:
        """``existing`` with ``event`` first among its components (relevance 1.0), dropping
        the lowest-scoring components until the whole fits ``max_tokens`` (default: the
        plugin's budget); the result says ``truncated`` when anything was dropped."""
        budget = self.service.settings.max_tokens if max_tokens is None else max_tokens
        now = event.time
        text = f"[{fmt_time(event.time)}] ({event.type}) {event.text}"
        new = Candidate(
            key=f"event:{event.id}",
            source="recent",
            section=SECTIONS["recent"],
            text=text,
            relevance=1.0,
            recency=recency(event.time, now, self.service.settings.half_life_hours),
            salience=event.salience,
            score=1.0,
            kind="event",
            source_id=event.id,
            time=event.time,
        )
        layout = self.service.layout(self.formatter, self.tokenizer)
        old = [_candidate(b, item) for b in existing.blocks for item in _items(b)]
        kept = [c for c in old if c.key != new.key]
        dropped = False
        while True:
            blocks = layout.blocks([new, *kept])
            if layout.tokens(blocks) <= budget or not kept:
                break
            kept.remove(min(kept, key=lambda c: (c.score, c.key)))
            dropped = True
        if layout.tokens(blocks) > budget:  # the event alone does not fit: nothing changes
            return existing
        return evolve(
            existing,
            content=layout.render(blocks),
            components=tuple(_component(c) for c in [new, *kept]),
            token_count=layout.tokens(blocks),
            truncated=existing.truncated or dropped,
            blocks=tuple(blocks),
        )


def _items(block: Block) -> list[tuple[str, dict[str, object]]]:
    """A section block's lines with their provenance items."""
    items = block.provenance.metadata.get("items")
    if not items:
        return []
    return list(zip(block.body.split("\n"), items, strict=True))


def _candidate(block: Block, pair: tuple[str, dict[str, object]]) -> Candidate:
    line, item = pair
    return Candidate(
        key=str(item["id"]),
        source=str(item["source"]),
        section=str(block.provenance.metadata["section"]),
        text=line,
        relevance=float(item["relevance"]),  # type: ignore[arg-type]
        recency=float(item["recency"]),  # type: ignore[arg-type]
        salience=float(item["salience"]),  # type: ignore[arg-type]
        score=float(item["score"]),  # type: ignore[arg-type]
        tokens=int(item["tokens"]),  # type: ignore[call-overload]
        kind=item["kind"],  # type: ignore[arg-type]
        source_id=str(item["source_id"]),
    )


def _component(c: Candidate) -> ContextComponent:
    return ContextComponent(
        type=COMPONENT_TYPES.get(c.source, "custom"),
        source=c.source_id or c.key,
        content=c.text,
        tokens=c.tokens,
        relevance_score=round(c.relevance, 6),
    )

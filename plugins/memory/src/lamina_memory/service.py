"""The memory layer for one configuration: its store, snapshot, embedder, cache and task stacks,
and ``blocks``, which turns a request into the memory layer's blocks."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from lamina import Block, ConfigError, LaminaConfig, Provenance, ProviderContext, Tokenizer
from lamina_memory.embedders import Embedder, get_embedder, registered_embedders
from lamina_memory.frames import TaskStack
from lamina_memory.importing import load_file
from lamina_memory.index import Snapshot
from lamina_memory.records import Candidate, Chunk, Memory, principals
from lamina_memory.retrieval import (
    SECTION_ORDER,
    SECTIONS,
    SOURCE_FUNCS,
    Filters,
    Query,
    Selection,
    select,
)
from lamina_memory.settings import Settings
from lamina_memory.signals import extract
from lamina_memory.store import MemoryStoreError, Store, open_store

SEPARATOR = "\n\n"
#: Rebuild the BM25 index once the streamed, unindexed tail exceeds this fraction of it.
REBUILD_FRACTION = 0.25


def placement_of(config: LaminaConfig) -> str:
    """Where the kernel will put the memory layer (``[placement]``, ``[layers.memory]``, event)."""
    layer = config.layers.get("memory")
    return config.placement.get("memory") or (layer.placement if layer else None) or "event"


def formatter_of(config: LaminaConfig) -> str:
    """The formatter that will render the memory layer: ``[format] history`` when it is placed
    in the history, else the layer's own (the kernel declares ``markdown`` for memory)."""
    return config.format.history if placement_of(config) == "history" else "markdown"


def _fence(text: str) -> str:
    """A backtick fence longer than any run inside ``text`` (at least three), as the kernel's
    markdown formatter makes it."""
    longest = max((len(m.group()) for m in re.finditer(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render(fmt: str, text: str, title: str | None) -> str:
    """The text a built-in formatter makes of one untrusted memory block (for counting; xml
    is over-estimated by escaping every ``&`` and ``<``)."""
    if fmt == "markdown":
        fence = _fence(text)
        body = f"{fence}\n{text}\n{fence}"
        return f"## {title}\n\n{body}" if title else body
    if fmt == "xml":
        attr = f' title="{title}"' if title else ""
        escaped = text.replace("&", "&amp;").replace("<", "&lt;")
        return f"<memory{attr}>\n{escaped}\n</memory>"
    return f"{title}\n{text}" if title else text


def layer_cap(config: LaminaConfig, available: int) -> int | None:
    """The kernel's cap on the memory layer, if ``[layers.memory]`` sets one."""
    layer = config.layers.get("memory")
    if layer is None:
        return None
    caps = [
        c
        for c in (layer.max_tokens, None if layer.share is None else int(layer.share * available))
        if c is not None
    ]
    return min(caps) if caps else None


def _parse_filters(settings: Settings, meta: Mapping[str, Any]) -> Filters:
    """Filters from settings, overridden by the request's ``metadata["memory"]``."""
    raw = meta.get("memory", {}) or {}
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a table", key="request.metadata.memory")

    def strs(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = raw.get(key, default)
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ConfigError("expected a list of strings", key=f"request.metadata.memory.{key}")
        return tuple(value)

    since_raw = raw.get("since", settings.since)
    since = None
    if since_raw is not None:
        try:
            since = (
                since_raw if isinstance(since_raw, datetime) else datetime.fromisoformat(since_raw)
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"expected an ISO date-time, got {since_raw!r}", key="memory.since"
            ) from exc
        if since.tzinfo is None:
            raise ConfigError(f"{since_raw!r} has no timezone", key="memory.since")
    return Filters(
        since=since,
        event_types=strs("event_types", settings.event_types),
        entity_types=strs("entity_types", settings.entity_types),
        exclude_ids=frozenset(strs("exclude_ids", settings.exclude_ids)),
    )


def _by_section(chosen: Iterable[Candidate]) -> list[tuple[str, list[Candidate]]]:
    """Candidates grouped by section, sections in injection order, items best first."""
    groups: dict[str, list[Candidate]] = {}
    for c in chosen:
        groups.setdefault(c.section, []).append(c)
    order = {name: i for i, name in enumerate(SECTION_ORDER)}
    return [
        (title, sorted(items, key=lambda c: (-c.score, c.key)))
        for title, items in sorted(groups.items(), key=lambda kv: order.get(kv[0], 99))
    ]


class MemoryService:
    """One configuration's memory layer (created once per ``Assembler``)."""

    def __init__(self, settings: Settings, config: LaminaConfig, *, plugin: str = "memory") -> None:
        self.settings = settings
        self.config = config
        self.plugin = plugin
        self._store: Store | None = None
        self._snapshot: Snapshot | None = None
        self._embedder: Embedder | None = None
        self._lock = threading.RLock()
        self._cache: dict[tuple[Any, ...], tuple[float, Selection]] = {}
        self._stacks: dict[str, TaskStack] = {}
        #: Token counts of item texts per tokenizer, kept across requests (texts repeat).
        self._counts: dict[str, dict[str, int]] = {}
        self._pool = ThreadPoolExecutor(max_workers=5, thread_name_prefix="lamina-memory")
        self.clock: Callable[[], float] = time.monotonic
        # Fail early on an unknown embedder name (its model loads on first use).
        if settings.embedder is not None and settings.embedder not in registered_embedders():
            raise ConfigError(
                f"unknown embedder {settings.embedder!r}; registered: "
                f"{', '.join(sorted(registered_embedders())) or 'none'}",
                file=config.where,
                key=config.key("plugins.memory.embedder"),
            )
        # Fail early on an unknown URL scheme (the store itself opens on first use).
        scheme = settings.store.partition(":")[0]
        if scheme not in ("sqlite", "postgresql", "postgres", "memory"):
            open_store(settings.store, root=config.root)

    # -- resources ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = open_store(self.settings.store, root=self.config.root)
                for f in self.settings.import_files:
                    if self._store.version() == 0:
                        self._store.add(load_file(self.config.resolve(f)))
            return self._store

    @property
    def embedder(self) -> Embedder | None:
        if self.settings.embedder is None:
            return None
        with self._lock:
            if self._embedder is None:
                self._embedder = get_embedder(
                    self.settings.embedder, self.settings.embedder_options
                )
            return self._embedder

    def snapshot(self) -> Snapshot:
        """The current snapshot, rebuilt when the store changed behind our back."""
        store = self.store
        with self._lock:
            v = store.version()
            snap = self._snapshot
            if snap is None or snap.version != v or snap.tail_fraction > REBUILD_FRACTION:
                snap = Snapshot(
                    version=v,
                    events=store.events(),
                    chunks=store.chunks(),
                    entities=store.entities(),
                    relations=store.relations(),
                    patterns=store.patterns(),
                )
                self._check_dim(snap)
                self._snapshot = snap
            return snap

    def _check_dim(self, snap: Snapshot) -> None:
        emb = self.embedder
        if emb is not None and snap.dim is not None and snap.dim != emb.dim:
            raise MemoryStoreError(
                f"memory store {self.store.url!r} holds {snap.dim}-dimensional embeddings, "
                f"but embedder {emb.name!r} makes {emb.dim}-dimensional ones"
            )

    # -- write API ----------------------------------------------------------------------

    def add(self, memories: Iterable[Memory], *, embed: bool = True) -> int:
        """Store memories; chunks without an embedding get one from the embedder (if any).
        Chunks appended to an up-to-date snapshot are folded in incrementally (streaming)."""
        items = list(memories)
        emb = self.embedder if embed else None
        if emb is not None:
            todo = [i for i, m in enumerate(items) if isinstance(m, Chunk) and m.embedding is None]
            if todo:
                vecs = emb.embed([items[i].text for i in todo])  # type: ignore[union-attr]
                for i, vec in zip(todo, vecs, strict=True):
                    c = items[i]
                    assert isinstance(c, Chunk)
                    items[i] = Chunk(
                        id=c.id,
                        text=c.text,
                        time=c.time,
                        session=c.session,
                        source=c.source,
                        embedding=tuple(float(x) for x in vec),
                        salience=c.salience,
                        acl=c.acl,
                    )
        store = self.store
        with self._lock:
            before = store.version()
            n = store.add(items)
            snap = self._snapshot
            only_chunks = all(isinstance(m, Chunk) for m in items)
            if snap is not None and snap.version == before and only_chunks:
                snap.extend_chunks([m for m in items if isinstance(m, Chunk)], store.version())
            self._cache.clear()
        return n

    def import_file(self, path: str) -> int:
        """Bulk import a ``.json``/``.jsonl`` file (all or nothing)."""
        return self.add(load_file(self.config.resolve(path)))

    def frames(self, session: str) -> TaskStack:
        """The task stack of ``session`` (created empty on first use)."""
        with self._lock:
            return self._stacks.setdefault(session, TaskStack())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # -- retrieval ------------------------------------------------------------------------

    def budget_for(self, ctx: ProviderContext) -> int:
        """The plugin's ``max_tokens``, never above the kernel's cap on the memory layer."""
        cap = layer_cap(ctx.config, ctx.budget.available)
        budget = self.settings.max_tokens
        return budget if cap is None else min(budget, cap)

    def retrieve(
        self,
        *,
        text: str,
        session: str,
        now: datetime,
        who: frozenset[str],
        filters: Filters,
        budget: int,
        tokenizer: Tokenizer,
        fmt: str,
        sources: tuple[str, ...] | None = None,
    ) -> tuple[Selection, list[str]]:
        """Query every enabled source concurrently and select within ``budget``; a failing
        source (other than a required one) drops out with a warning."""
        s = self.settings
        snap = self.snapshot()
        frames = self._stacks.get(session)
        frame_lines = frames.context_lines() if frames is not None and s.frames_budget else []
        current = frames.peek() if frames is not None else None
        query_text = f"{current.goal}\n{text}" if current is not None else text
        key = (
            session,
            query_text,
            budget,
            snap.version,
            who,
            filters,
            fmt,
            sources,
            tuple(frame_lines),
        )
        hit = self._cache.get(key) if s.cache_ttl > 0 else None
        if hit is not None and hit[0] > self.clock():
            return hit[1], []
        warnings: list[str] = []
        vector = None
        emb = self.embedder
        if emb is not None:
            vector = emb.embed([query_text])[0]
        signals = extract(query_text, [e.name for e in snap.entities])
        q = Query(
            signals=signals,
            session=session,
            now=now,
            who=who,
            filters=filters,
            settings=s,
            query_vector=vector,
            nearest=getattr(self._store, "nearest", None) if s.dense_search == "store" else None,
        )
        enabled = [x for x in s.sources if sources is None or x in sources]
        futures = {name: self._pool.submit(SOURCE_FUNCS[name], snap, q) for name in enabled}
        found: dict[str, list[Candidate]] = {}
        for name, fut in futures.items():
            try:
                found[name] = fut.result()
            except Exception as exc:
                if name in s.required_sources:
                    raise
                warnings.append(
                    f"plugin {self.plugin!r}: memory source {name!r} failed "
                    f"({type(exc).__name__}: {exc}); the other sources were still injected"
                )
        counts = self._counts.setdefault(tokenizer.name, {})
        if len(counts) > 200_000:
            counts.clear()

        def count(t: str) -> int:
            n = counts.get(t)
            if n is None:
                n = counts[t] = tokenizer.count(t)
            return n

        sep = count(SEPARATOR)

        line_end = count("\n")
        frame_cost = {
            title: count(render(fmt, "x", title)) - count("x") + sep for title in SECTION_ORDER
        }

        def cost(c: Candidate, first: bool) -> int:
            return count(c.text) + line_end + (frame_cost[c.section] if first else 0)

        frame_cands: list[Candidate] = []
        for i, (line, _share) in enumerate(frame_lines):
            frame_cands.append(
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
            )
        shares = {name: s.share_of(name) for name in found}
        if frame_cands:
            frame_share = sum(share for _, share in frame_lines)
            shares = {k: v * (1 - frame_share) for k, v in shares.items()}
            shares["frames"] = frame_share
            found["frames"] = frame_cands
        selection = select(found, budget=budget, shares=shares, weights=s.score_weights, cost=cost)
        if s.cache_ttl > 0:
            self._cache[key] = (self.clock() + s.cache_ttl, selection)
            if len(self._cache) > 512:
                now_t = self.clock()
                for k in [k for k, (exp, _) in self._cache.items() if exp <= now_t]:
                    del self._cache[k]
        return selection, warnings

    @staticmethod
    def _rendered_tokens(chosen: list[Candidate], fmt: str, count: Callable[[str], int]) -> int:
        """Tokens of the memory layer as the formatter will render it, separators included."""
        groups = _by_section(chosen)
        rendered = [render(fmt, "\n".join(c.text for c in items), title) for title, items in groups]
        return count(SEPARATOR.join(rendered)) + (count(SEPARATOR) if rendered else 0)

    @staticmethod
    def _section_block(ctx: ProviderContext, section: str, items: list[Candidate]) -> Block:
        """One section's block: its items best first, one per line, each item's provenance
        (source id, scores, tokens) in ``provenance.metadata["items"]``."""
        slug = section.lower().replace(" ", "_")
        return Block.text(
            f"memory.{slug}",
            "memory",
            "\n".join(c.text for c in items),
            title=section,
            tag="memory",
            priority=max(0.0, min(1.0, max(c.score for c in items))),
            truncation="end",
            trusted=False,
            provenance=Provenance(
                plugin=ctx.plugin,
                source_id=slug,
                metadata={
                    "section": section,
                    "items": [
                        {
                            "id": c.key,
                            "source_id": c.source_id,
                            "kind": c.kind,
                            "source": c.source,
                            "score": round(c.score, 6),
                            "relevance": round(c.relevance, 6),
                            "recency": round(c.recency, 6),
                            "salience": round(c.salience, 6),
                            "tokens": c.tokens,
                        }
                        for c in items
                    ],
                },
            ),
        )

    def blocks(self, ctx: ProviderContext) -> tuple[list[Block], list[str]]:
        """The memory layer's blocks for one request, and any warnings for the report."""
        req = ctx.request
        raw = req.metadata.get("memory", {}) or {}
        filters = _parse_filters(self.settings, req.metadata)
        sources = raw.get("sources") if isinstance(raw, Mapping) else None
        budget = self.budget_for(ctx)
        if budget <= 0 or not req.event.content.strip():
            return [], []
        fmt = formatter_of(ctx.config)
        selection, warnings = self.retrieve(
            text=str(raw.get("query") or req.event.content),
            session=req.session_label,
            now=req.event.time or ctx.now,
            who=principals(req.permissions, req.metadata, req.role),
            filters=filters,
            budget=budget,
            tokenizer=ctx.tokenizer,
            fmt=fmt,
            sources=None if sources is None else tuple(sources),
        )
        chosen = list(selection.chosen)
        count = ctx.tokenizer.count
        while chosen and self._rendered_tokens(chosen, fmt, count) > budget:
            chosen.remove(min(chosen, key=lambda c: (c.score, c.key)))  # BPE merges: re-check
        out = [self._section_block(ctx, section, items) for section, items in _by_section(chosen)]
        used = self._rendered_tokens(chosen, fmt, count)
        seen_sections = {c.section for c in chosen}
        left = selection.budget - used
        if (
            self.settings.compress
            and selection.overflow
            and left >= self.settings.compress_min_tokens
        ):
            lines = [c.text for c in selection.overflow[:64]]
            first = SECTIONS["additional"] not in seen_sections
            out.append(
                Block.text(
                    "memory.additional",
                    "memory",
                    "\n".join(lines),
                    title=SECTIONS["additional"] if first else None,
                    tag="memory",
                    priority=0.0,
                    truncation="end",
                    summarizable=True,
                    max_tokens=max(0, left - 8),
                    trusted=False,
                    provenance=Provenance(
                        plugin=ctx.plugin,
                        source_id="additional",
                        metadata={
                            "compressed": [c.key for c in selection.overflow[:64]],
                            "section": SECTIONS["additional"],
                        },
                    ),
                )
            )
        return out, warnings

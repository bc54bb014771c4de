"""The memory layer for one configuration: its store, snapshot, embedder, cache and task stacks,
and ``blocks``, which turns a request into the memory layer's blocks. A retrieval's sources and
selection are in ``gathering.py``, an import's batches and progress in ``importing.py``."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from lamina import MEMORY, Block, ConfigError, Formatter, LaminaConfig, ProviderContext, Tokenizer
from lamina_memory.blas import one_blas_thread
from lamina_memory.builder import ContextBuilder, ContextRequest
from lamina_memory.embedders import Embedder, get_embedder, registered_embedders
from lamina_memory.errors import MemoryStoreError
from lamina_memory.filters import (
    additional_context,
    parse_filters,
    requested_sources,
    requested_strategy,
)
from lamina_memory.frames import TaskStack
from lamina_memory.gathering import choose, gather
from lamina_memory.importing import IMPORT_BATCH, ImportProgress, load_file
from lamina_memory.index import Snapshot
from lamina_memory.layout import Layout, Layouts
from lamina_memory.query import Filters
from lamina_memory.records import Chunk, Memory, principals
from lamina_memory.selection import Selection
from lamina_memory.settings import Settings
from lamina_memory.store import Store, check_url, open_store

#: ``embedder`` values that are not registered names: the model if present, or BM25 alone.
AUTO_OR_OFF = ("auto", "none")
#: Rebuild the BM25 index once the streamed, unindexed share exceeds this fraction of it.
REBUILD_FRACTION = 0.25
#: Cached results kept before expired ones are swept.
CACHE_SWEEP = 512


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
        #: The formatters seen and token counts of item texts, kept across requests.
        self._layouts = Layouts()
        self._pool = ThreadPoolExecutor(max_workers=5, thread_name_prefix="lamina-memory")
        self.clock: Callable[[], float] = time.monotonic
        #: Why dense retrieval is off although ``embedder = "auto"`` asked for it (the model is
        #: not installed): one warning in each report.
        self.fallback: str | None = None
        #: Told (done, total) of the chunks a PostgreSQL store analyses when it opens without
        #: its full-text column (the CLI draws it through ``lamina.progress``).
        self.index_progress: Callable[[int, int], None] | None = None
        # Fail early on an unknown embedder name (its model loads on first use).
        if settings.embedder not in (None, *AUTO_OR_OFF) and (
            settings.embedder not in registered_embedders()
        ):
            raise ConfigError(
                f"unknown embedder {settings.embedder!r}; registered: "
                f"{', '.join(sorted(registered_embedders())) or 'none'}",
                file=config.where,
                key=config.key("plugins.memory.embedder"),
            )
        check_url(settings.store)  # fail early on an unknown scheme; the store opens on first use

    # -- resources ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                store = self._store = open_store(
                    self.settings.store, root=self.config.root, progress=self.index_progress
                )
                if self.settings.import_files and store.version() == 0:  # every file, embedded
                    for f in self.settings.import_files:
                        items, _ = self._embedded(load_file(self.config.resolve(f)), True)
                        store.add(items)
            return self._store

    @property
    def embedder(self) -> Embedder | None:
        """The configured embedder, loaded on first use; with ``auto``, the built-in MiniLM if
        its model is installed, else None (BM25 alone) and ``fallback`` says why."""
        name = self.settings.embedder
        if name is None or name == "none":
            return None
        with self._lock:
            if self._embedder is None and self.fallback is None:
                if name == "auto":
                    try:
                        self._embedder = get_embedder("minilm", self.settings.embedder_options)
                    except ConfigError as exc:
                        self.fallback = (
                            f"plugin {self.plugin!r}: dense retrieval is off, BM25 only "
                            f'({exc}; set embedder = "none" to silence this)'
                        )
                else:
                    self._embedder = get_embedder(name, self.settings.embedder_options)
            return self._embedder

    def snapshot(self) -> Snapshot:
        """The current snapshot, rebuilt when the store changed behind our back."""
        store = self.store
        with self._lock:
            snap = self._snapshot
            if (
                snap is None
                or snap.version != store.version()
                or snap.tail_fraction > REBUILD_FRACTION
            ):
                in_store = self.chunks_in_store
                c = store.contents(chunks=not in_store)
                snap = Snapshot(
                    version=c.version,
                    events=c.events,
                    chunks=c.chunks,
                    entities=c.entities,
                    relations=c.relations,
                    patterns=c.patterns,
                    chunks_in_store=in_store,
                )
                self._check_dim(snap)
                self._snapshot = snap
            return snap

    @property
    def chunks_in_store(self) -> bool:
        """Whether the store ranks the chunks (PostgreSQL with ``dense_search = "store"``):
        then no snapshot holds them."""
        return self.store.searches_chunks and self.settings.dense_search == "store"

    def _check_dim(self, snap: Snapshot) -> None:
        emb = self.embedder
        dim = self.store.embedding_dim() if snap.chunks_in_store else snap.dim
        if emb is not None and dim is not None and dim != emb.dim:
            raise MemoryStoreError(
                f"memory store {self.store.name!r} holds {dim}-dimensional embeddings, "
                f"but embedder {emb.name!r} makes {emb.dim}-dimensional ones"
            )

    # -- write API ----------------------------------------------------------------------

    def _embedded(self, items: list[Memory], embed: bool) -> tuple[list[Memory], int]:
        """``items`` with an embedding on every chunk that has none (when there is an
        embedder), and how many were embedded."""
        emb = self.embedder if embed else None
        if emb is None:
            return items, 0
        todo = [(i, m) for i, m in enumerate(items) if isinstance(m, Chunk)]
        todo = [(i, c) for i, c in todo if c.embedding is None]
        if not todo:
            return items, 0
        out = list(items)
        with one_blas_thread():
            vecs = emb.embed([c.text for _, c in todo])
        for (i, c), vec in zip(todo, vecs, strict=True):
            out[i] = attrs.evolve(c, embedding=tuple(float(x) for x in vec))
        return out, len(todo)

    def add(
        self,
        memories: Iterable[Memory],
        *,
        embed: bool = True,
        marks: Mapping[str, str | None] | None = None,
    ) -> int:
        """Store memories (a known id is replaced); chunks without an embedding get one from
        the embedder (if any). Chunks written to an up-to-date snapshot are folded into it
        (streaming), replacing the old version of a re-added id at once. ``marks``: bookmarks
        written in the same transaction (``Store.write``)."""
        items, _ = self._embedded(list(memories), embed)
        self._write(items, marks)
        return len(items)

    def _write(self, items: list[Memory], marks: Mapping[str, str | None] | None) -> None:
        store = self.store
        with self._lock:
            version = store.write(items, marks=marks)
            snap = self._snapshot
            if snap is not None and snap.version == version - 1:
                if all(isinstance(m, Chunk) for m in items):
                    snap.fold([m for m in items if isinstance(m, Chunk)], version)
                else:
                    self._snapshot = None  # events, entities…: rebuilt on the next query
            self._cache.clear()

    def import_memories(
        self,
        memories: Sequence[Memory],
        *,
        key: str,
        batch: int = IMPORT_BATCH,
        progress: Callable[[ImportProgress], None] | None = None,
    ) -> ImportProgress:
        """Write ``memories`` in batches, each one transaction with the count written so far
        under ``key``: an interrupted import run again resumes after the last batch written
        (nothing is embedded or written twice); the bookmark goes with the last batch."""
        start = int(self.store.mark(key) or 0)
        state = ImportProgress(total=len(memories), start=start, done=start, started=self.clock())
        for i in range(start, len(memories), batch):
            part, embedded = self._embedded(list(memories[i : i + batch]), True)
            done = i + len(part)
            self._write(part, {key: str(done) if done < len(memories) else None})
            state = attrs.evolve(state, done=done, embedded=state.embedded + embedded)
            if progress is not None:
                progress(attrs.evolve(state, elapsed=self.clock() - state.started))
        return state

    def import_file(
        self, path: str, *, progress: Callable[[ImportProgress], None] | None = None
    ) -> ImportProgress:
        """Bulk import a ``.json``/``.jsonl`` file: checked whole before anything is written,
        then written in batches that a second run resumes after an interruption."""
        resolved = self.config.resolve(path)
        memories = load_file(resolved)
        key = "import:" + hashlib.sha256(Path(resolved).read_bytes()).hexdigest()
        return self.import_memories(memories, key=key, progress=progress)

    def frames(self, session: str) -> TaskStack:
        """The task stack of ``session``: read from the store on first use (empty if it holds
        none), every change written back to it."""
        with self._lock:
            stack = self._stacks.get(session)
            if stack is None:
                key = f"frames:{session}"

                def save(text: str) -> None:
                    self.store.put_mark(key, text)
                    with self._lock:
                        self._cache.clear()

                saved = self.store.mark(key)
                stack = TaskStack.loads(saved, save) if saved else TaskStack(save)
                self._stacks[session] = stack
            return stack

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # -- retrieval ------------------------------------------------------------------------

    def budget_for(self, ctx: ProviderContext) -> int:
        """The plugin's ``max_tokens``, never above the kernel's cap on the memory layer."""
        cap = ctx.layer(MEMORY).cap
        budget = self.settings.max_tokens
        return budget if cap is None else min(budget, cap)

    def layout(self, fmt: Formatter | str, tokenizer: Tokenizer) -> Layout:
        """Sizing with ``fmt`` (the kernel's formatter for the memory layer) and ``tokenizer``,
        token counts of texts remembered across requests."""
        return self._layouts.get(fmt, tokenizer, plugin=self.plugin)

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
        fmt: Formatter | str,
        sources: tuple[str, ...] | None = None,
        weights: tuple[float, float, float] | None = None,
        additional: str | None = None,
    ) -> tuple[Selection, list[str]]:
        """Query every enabled source concurrently and select within ``budget`` as ``fmt``
        renders it; a failing source (other than a required one) drops out with a warning.
        ``weights`` override the settings' strategy; ``additional`` is the caller's own text
        for the Additional Context section (taken first, like the task frames)."""
        s = self.settings
        weights = weights or s.score_weights
        snap = self.snapshot()
        layout = self.layout(fmt, tokenizer)
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
            layout.formatter.name,
            tokenizer.name,
            sources,
            tuple(frame_lines),
            weights,
            additional,
        )
        hit = self._cache.get(key) if s.cache_ttl > 0 else None
        if hit is not None and hit[0] > self.clock():
            return hit[1], []
        found, warnings = gather(
            self._pool,
            snap,
            query_text,
            settings=s,
            embedder=self.embedder,
            store=self.store,
            session=session,
            now=now,
            who=who,
            filters=filters,
            sources=sources,
            plugin=self.plugin,
        )
        selection = choose(
            found,
            settings=s,
            frame_lines=frame_lines,
            additional=additional,
            budget=budget,
            weights=weights,
            cost=layout.cost,
        )
        selection = attrs.evolve(
            selection,
            searched=self.store.count() if snap.chunks_in_store else len(snap.chunks),
        )
        if s.cache_ttl > 0:
            self._cache[key] = (self.clock() + s.cache_ttl, selection)
            if len(self._cache) > CACHE_SWEEP:
                now_t = self.clock()
                for k in [k for k, (exp, _) in self._cache.items() if exp <= now_t]:
                    del self._cache[k]
        return selection, warnings

    def builder(self, tokenizer: Tokenizer, formatter: Formatter | str) -> ContextBuilder:
        """The memory framework design's ``ContextBuilder`` over this service."""
        return ContextBuilder(self, tokenizer=tokenizer, formatter=formatter)

    def blocks(self, ctx: ProviderContext) -> tuple[list[Block], list[str]]:
        """The memory layer's blocks for one request, and any warnings for the report: the
        request as a ``ContextRequest``, built by the ``ContextBuilder``."""
        req = ctx.request
        raw = req.metadata.get("memory") or {}
        built = self.builder(ctx.tokenizer, ctx.layer(MEMORY).formatter).build(
            ContextRequest(
                query=str(raw.get("query") or req.event.content),
                session_id=req.session_label,
                max_tokens=self.budget_for(ctx),
                filters=parse_filters(self.settings, req.metadata),
                sources=requested_sources(req.metadata),
                principals=principals(req.permissions, req.metadata, req.role),
                now=req.event.time or ctx.now,
                additional_context=additional_context(raw.get("additional_context")),
                strategy=requested_strategy(raw.get("strategy")),
            )
        )
        warnings = list(built.warnings)
        if self.fallback is not None:
            warnings = [self.fallback, *warnings]
        return list(built.blocks), warnings

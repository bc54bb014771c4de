"""PostgreSQL's dense search run alongside its BM25 search: on a second connection of the
store's, in a thread of its own, in a transaction that imports the first one's snapshot
(``pg_export_snapshot``), so the two lists read the same chunks while the server walks the
HNSW index and the client works through the postings at the same time."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime
from threading import Lock
from typing import Any

from lamina_memory.db import Database
from lamina_memory.pgread import Hit
from lamina_memory.pgsearch import ChunkSearch
from lamina_memory.query import resolved


class DenseAlongside:
    """The second connection (opened at its first search) and its thread, for one store."""

    def __init__(self, url: str, *, prefix: str, connect_timeout: int = 5) -> None:
        self.url, self.prefix = url, prefix
        self.connect_timeout = connect_timeout
        self._lock = Lock()
        self._search: ChunkSearch | None = None
        self._pool: ThreadPoolExecutor | None = None
        #: The store's embedding dimension once it has one: set by the first write of a
        #: vector and never changed (a write of another dimension is refused), so it is read
        #: until it is known, then kept.
        self._dim: int | None = None

    def both(
        self,
        search: ChunkSearch,
        terms: Sequence[str],
        vector: Any,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
        limit: int,
        overfetch: int,
    ) -> tuple[list[Hit], list[Hit]]:
        """``search``'s BM25 hits over ``terms`` and the dense hits near ``vector``, the dense
        search alongside (inside ``search.db``'s read, whose snapshot it shares)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="lamina-memory-dense")
            pool = self._pool
        # Begun now, in the snapshot of ``search.db``'s read, which stays open until the
        # result is taken.
        future = pool.submit(
            self._dense,
            search.db.export_snapshot(),
            vector,
            who=who,
            since=since,
            exclude=exclude,
            limit=limit,
            overfetch=overfetch,
        )
        try:
            lexical = search.lexical(terms, who=who, since=since, exclude=exclude, limit=limit)
        except BaseException:
            wait([future])  # done before the snapshot's read ends
            raise
        return lexical, future.result()

    def _dense(
        self,
        snapshot: str,
        vector: Any,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
        limit: int,
        overfetch: int,
    ) -> list[Hit]:
        """``ChunkSearch.dense`` in the snapshot ``snapshot``, on this thread's connection."""
        import numpy as np

        # (the query's embedding may still be being computed: waited for here, not before
        # the BM25 search starts)
        vector = np.asarray(resolved(vector), dtype=np.float32)
        search = self._searcher()
        with search.db.read(snapshot=snapshot) as db:
            if self._dim is None:
                known = db.one(f"SELECT value FROM {search.meta} WHERE key = 'dim'")
                if known is None:
                    return []
                self._dim = int(known[0])
            return search.dense(
                vector,
                dim=self._dim,
                who=who,
                since=since,
                exclude=exclude,
                limit=limit,
                overfetch=overfetch,
            )

    def _searcher(self) -> ChunkSearch:
        if self._search is None:
            db = Database.postgres(self.url, connect_timeout=self.connect_timeout)
            db.register_vectors()
            self._search = ChunkSearch(db, self.prefix)
        return self._search

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self._search is not None:
            self._search.db.close()
            self._search = None

"""Memory stores: one store over a dialect-aware ``Database`` (the embedded SQLite default,
created on first use, or PostgreSQL with pgvector at scale), and how a URL picks one.

A store holds the five kinds of memory and answers the few reads retrieval needs. On SQLite,
retrieval works on an in-memory ``Snapshot`` rebuilt only when the store's ``version`` moves;
on PostgreSQL the store searches the chunks itself (``pgsearch``: BM25 from impact-ordered
postings, pgvector's HNSW index) and the snapshot holds no chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from lamina import ConfigError
from lamina_memory.db import Database
from lamina_memory.errors import MemoryStoreError
from lamina_memory.pgdense import DenseAlongside
from lamina_memory.pgread import Hit, Near
from lamina_memory.pgsearch import Analysed, ChunkSearch, Progress, analysed, columns
from lamina_memory.query import resolved
from lamina_memory.records import (
    KIND_OF,
    Chunk,
    Entity,
    EpisodicEvent,
    Kind,
    Memory,
    Pattern,
    Relation,
)
from lamina_memory.rows import RowMapping
from lamina_memory.storetypes import Contents, Store

__all__ = [
    "SCHEMES",
    "Contents",
    "MemoryStoreError",
    "PostgresStore",
    "SQLStore",
    "SQLiteStore",
    "Store",
    "check_dims",
    "check_url",
    "open_store",
]

SCHEMES = ("sqlite", "postgresql", "postgres", "memory")
#: Serialises schema creation by concurrent processes on one PostgreSQL database.
_PG_SCHEMA_LOCK = 7_423_013_003
#: The columns a PostgreSQL chunk row has beyond the record's: its analysed text.
_PG_CHUNK_EXTRA = (
    ("lexemes", "?::tsvector"),
    ("terms", "?::text[]"),
    ("tfs", "?::int[]"),
    ("nterms", "?"),
)


def check_url(url: str) -> str:
    """The scheme of a store URL; anything but ``sqlite``, ``memory`` or ``postgresql`` is a
    ``ConfigError`` naming ``plugins.memory.store``."""
    scheme, sep, _rest = url.partition(":")
    if not sep or scheme not in SCHEMES:
        raise ConfigError(
            f"unknown memory store URL {url!r}; use sqlite:///PATH, memory: or postgresql://…",
            key="plugins.memory.store",
        )
    return scheme


def open_store(url: str, *, root: Path | None = None, progress: Progress | None = None) -> SQLStore:
    """The store a URL names: ``sqlite:///path`` (relative to ``root``), ``memory:`` (SQLite in
    memory) or ``postgresql://…`` (pgvector). Anything else is a ``ConfigError``. ``progress``
    (done, total) counts the chunks a PostgreSQL store analyses when it opens without them."""
    scheme = check_url(url)
    if scheme == "memory":
        return SQLiteStore(":memory:", url=url)
    if scheme == "sqlite":
        rest = url.partition(":")[2]
        path = rest.removeprefix("//")
        if path.startswith("/") and not rest.startswith("////"):
            path = path[1:]  # sqlite:///rel → rel ; sqlite:////abs → /abs
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = (root or Path.cwd()) / p
        return SQLiteStore(str(p), url=url)
    return PostgresStore(url, progress=progress)


def check_dims(chunks: Sequence[Chunk], known: int | None, where: str) -> int | None:
    """The one embedding dimension of ``chunks`` (and the store's), or an error naming both."""
    dim = known
    for c in chunks:
        if c.embedding is None:
            continue
        if dim is None:
            dim = len(c.embedding)
        elif len(c.embedding) != dim:
            raise MemoryStoreError(
                f"{where}: chunk {c.id!r} has an embedding of {len(c.embedding)} dimensions, "
                f"but the store holds {dim}-dimensional embeddings"
            )
    return dim


class SQLStore:
    """The five kinds of memory in one database, either dialect; writes are upserts by id in
    one transaction, and every write moves the store's ``version``."""

    def __init__(
        self,
        db: Database,
        *,
        url: str,
        progress: Progress | None = None,
        connect_timeout: int = 5,
    ) -> None:
        self.url = url
        #: The URL fit to print (without a password).
        self.name = db.name
        self.db = db
        self.rows = RowMapping(db.dialect)
        #: Store-side chunk retrieval (PostgreSQL only).
        self.search = ChunkSearch(db, self.rows.prefix) if db.dialect == "postgres" else None
        #: The dense search's own connection opens with the store's connect timeout.
        self._alongside = DenseAlongside(
            url, prefix=self.rows.prefix, connect_timeout=connect_timeout
        )
        try:
            with db.write():
                if db.dialect == "postgres":
                    db.execute("SELECT pg_advisory_xact_lock(?)", (_PG_SCHEMA_LOCK,))
                for statement in self.rows.schema():
                    db.execute(statement)
                if self.search is not None:
                    self.search.ensure(progress)
                known = self._meta("dim")
                if known is not None:
                    self._vector_index(int(known))
            if db.dialect == "postgres":
                db.register_vectors()
        except MemoryStoreError:
            db.close()
            raise

    @property
    def searches_chunks(self) -> bool:
        """Whether the store ranks the chunks itself (PostgreSQL), so retrieval never reads
        them all."""
        return self.search is not None

    @property
    def indexes_vectors(self) -> bool:
        """Whether ``nearest`` asks the database's own vector index (pgvector)."""
        return self.db.dialect == "postgres"

    def _vector_index(self, dim: int) -> None:
        """On PostgreSQL, the HNSW index (cosine) that ``nearest`` searches: over the vectors
        cast to the store's one dimension, as pgvector indexes only typed columns."""
        if self.db.dialect != "postgres":
            return
        self.db.execute(
            f"CREATE INDEX IF NOT EXISTS {self.rows.prefix}chunks_embedding_hnsw ON "
            f"{self.rows.table('chunk')} USING hnsw ((embedding::vector({int(dim)})) "
            "vector_cosine_ops)"
        )

    def _meta(self, key: str, *, alone: bool = False) -> str | None:
        """A meta value; ``alone``: read by itself, outside any transaction (``read_one``)."""
        sql = f"SELECT value FROM {self.rows.meta} WHERE key = ?"
        row = self.db.read_one(sql, (key,)) if alone else self.db.one(sql, (key,))
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            f"INSERT INTO {self.rows.meta} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def version(self) -> int:
        return int(self._meta("version", alone=True) or 0)

    def embedding_dim(self) -> int | None:
        v = self._meta("dim", alone=True)
        return None if v is None else int(v)

    def add(self, memories: Iterable[Memory]) -> int:
        """Insert or replace memories (by id) in one transaction; returns how many."""
        items = list(memories)
        self.write(items)
        return len(items)

    def mark(self, key: str) -> str | None:
        """A bookmark kept beside the memories (an import's progress), or None."""
        return self._meta(f"mark:{key}", alone=True)

    def put_mark(self, key: str, value: str) -> None:
        """Keep a bookmark (task frames) without moving the version: no memory changed."""
        with self.db.write():
            self._set_meta(f"mark:{key}", value)

    def write(
        self, memories: Iterable[Memory], *, marks: Mapping[str, str | None] | None = None
    ) -> int:
        """Insert or replace memories (by id) in one transaction; returns the version this write
        made. A replaced chunk keeps its place in the chunks' order. ``marks`` are bookmarks
        set (or, None, removed) in the same transaction: an import's progress is exactly what
        was written."""
        items = list(memories)
        where = self.db.name
        rows = [self.rows.row(m, where=where) for m in items]  # refuses bad data up front
        db = self.db
        with db.write():
            if db.dialect == "postgres":  # one writer at a time: versions and seq stay dense
                db.execute(f"LOCK TABLE {self.rows.meta} IN EXCLUSIVE MODE")
            known = self._meta("dim")
            chunks = [m for m in items if isinstance(m, Chunk)]
            dim = check_dims(chunks, None if known is None else int(known), where)
            if dim is not None and known is None:
                self._set_meta("dim", str(dim))
                self._vector_index(dim)
            found = db.one(f"SELECT COALESCE(MAX(seq), 0) FROM {self.rows.table('chunk')}")
            seq = int(found[0]) if found else 0
            by_kind: dict[Kind, list[tuple[Any, ...]]] = {}
            texts: dict[str, Analysed] = {}
            for m, row in zip(items, rows, strict=True):
                if isinstance(m, Chunk):
                    seq += 1
                    row = (*row[:-1], seq)
                    if self.search is not None:
                        texts[m.id] = words = analysed(m.text)
                        row = (*row, *columns(words))
                by_kind.setdefault(KIND_OF[type(m)], []).append(row)
            if self.search is not None and texts:
                # Before the rows change: a replaced chunk's terms and postings leave.
                self.search.postings.unpost(self.search.count_terms(texts))
            for kind, kind_rows in by_kind.items():
                extra = _PG_CHUNK_EXTRA if kind == "chunk" and self.search is not None else ()
                db.many(self.rows.upsert(kind, extra), kind_rows)
            if self.search is not None and texts:
                self.search.postings.post(list(texts))
            for key, value in (marks or {}).items():
                if value is None:
                    db.execute(f"DELETE FROM {self.rows.meta} WHERE key = ?", (f"mark:{key}",))
                else:
                    self._set_meta(f"mark:{key}", value)
            version = int(self._meta("version") or 0) + 1
            self._set_meta("version", str(version))
        return version

    def _read(self, kind: Kind) -> list[Any]:
        return [self.rows.record(kind, r) for r in self.db.rows(self.rows.select(kind))]

    def contents(self, *, chunks: bool = True) -> Contents:
        """Everything, read in one transaction (so the version matches what was read); without
        the chunks when ``chunks`` is false (a store that searches them itself)."""
        with self.db.read():
            return Contents(
                version=int(self._meta("version") or 0),
                events=self._read("event"),
                chunks=self._read("chunk") if chunks else [],
                entities=self._read("entity"),
                relations=self._read("relation"),
                patterns=self._read("pattern"),
            )

    def events(self) -> list[EpisodicEvent]:
        with self.db.read():
            return self._read("event")

    def chunks(self) -> list[Chunk]:
        with self.db.read():
            return self._read("chunk")

    def entities(self) -> list[Entity]:
        with self.db.read():
            return self._read("entity")

    def relations(self) -> list[Relation]:
        with self.db.read():
            return self._read("relation")

    def patterns(self) -> list[Pattern]:
        with self.db.read():
            return self._read("pattern")

    def count(self) -> int:
        """How many chunks the store holds (PostgreSQL: from the BM25 totals, not a scan)."""
        if self.search is not None:
            return int(self._meta("bm25_docs", alone=True) or 0)
        found = self.db.read_one(f"SELECT count(*) FROM {self.rows.table('chunk')}")
        return int(found[0]) if found else 0

    def _searcher(self) -> ChunkSearch:
        if self.search is None:
            raise MemoryStoreError(f"{self.name}: this store does not search chunks itself")
        return self.search

    def search_chunks(
        self,
        terms: Sequence[str],
        vector: Any,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
        limit: int,
        overfetch: int,
    ) -> tuple[list[Hit], list[Hit]]:
        """The ``limit`` best chunks the caller may see by BM25 over ``terms`` (analysed) and,
        with a ``vector``, by cosine similarity (pgvector's HNSW index, ``limit × overfetch``
        asked of it), read in one snapshot: the dense search on a second connection, in a
        thread, while this one's BM25 search runs (``pgdense``)."""
        search = self._searcher()
        with self.db.read():
            if vector is not None and not self.db.writing:
                return self._alongside.both(
                    search,
                    terms,
                    vector,
                    who=who,
                    since=since,
                    exclude=exclude,
                    limit=limit,
                    overfetch=overfetch,
                )
            lexical = search.lexical(terms, who=who, since=since, exclude=exclude, limit=limit)
            dense: list[Hit] = []
            known = self._meta("dim")
            if vector is not None and known is not None:
                import numpy as np

                dense = search.dense(
                    np.asarray(resolved(vector), dtype=np.float32),
                    dim=int(known),
                    who=who,
                    since=since,
                    exclude=exclude,
                    limit=limit,
                    overfetch=overfetch,
                )
        return lexical, dense

    def chunks_around(
        self,
        hits: Sequence[tuple[int, str]],
        reach: int,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> Near:
        """Each hit's (seq, session) neighbours that count, as (hit, seq, distance) in three
        lists (``ChunkSearch.around``: one statement, which sees one snapshot by itself)."""
        return self._searcher().around(hits, reach, who=who, since=since, exclude=exclude)

    def chunks_at(
        self,
        seqs: Sequence[int],
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> list[Hit]:
        """The chunks at ``seqs`` the caller may see (``ChunkSearch.at``: one statement)."""
        return self._searcher().at(seqs, who=who, since=since, exclude=exclude)

    def reindex(self, progress: Progress | None = None) -> int:
        """Analyse every chunk's text again, count the terms and write the postings again
        (PostgreSQL), then rebuild the chunk table's indexes; returns how many chunks."""
        search = self._searcher()
        with self.db.write():
            self.db.execute(f"LOCK TABLE {self.rows.meta} IN EXCLUSIVE MODE")
            total = search.reanalyse(progress)
            self.db.execute(f"REINDEX TABLE {self.rows.table('chunk')}")
        return total

    def nearest(self, vector: Iterable[float], k: int) -> list[tuple[str, float]]:
        """The ``k`` chunks closest to ``vector`` by cosine distance (pgvector ``<=>``, through
        the HNSW index: approximate, as pgvector's HNSW search is)."""
        if not self.indexes_vectors:
            raise MemoryStoreError(f"{self.name}: this store has no vector index")
        import numpy as np

        v = np.asarray(list(vector), dtype=np.float32)
        with self.db.read():
            known = self._meta("dim")
            if known is None:
                return []
            typed = f"vector({int(known)})"
            found = self.db.rows(
                f"SELECT id, 1 - (embedding::{typed} <=> ?b::{typed}) "
                f"FROM {self.rows.table('chunk')} WHERE embedding IS NOT NULL "
                f"ORDER BY embedding::{typed} <=> ?b::{typed} LIMIT ?",
                (v, v, k),
            )
        return [(str(r[0]), float(r[1])) for r in found]

    def close(self) -> None:
        self._alongside.close()
        self.db.close()


class SQLiteStore(SQLStore):
    """The embedded default: one SQLite file, or ``:memory:``."""

    def __init__(self, path: str, *, url: str | None = None) -> None:
        self.path = path
        name = url or f"sqlite:///{path}"
        super().__init__(Database.sqlite(path, name=name), url=name)


class PostgresStore(SQLStore):
    """Memories in PostgreSQL, chunk vectors in a pgvector column (the ``postgres`` extra;
    the store creates the ``vector`` extension if it may)."""

    def __init__(
        self, url: str, *, connect_timeout: int = 5, progress: Progress | None = None
    ) -> None:
        super().__init__(
            Database.postgres(url, connect_timeout=connect_timeout),
            url=url,
            progress=progress,
            connect_timeout=connect_timeout,
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self.name!r})"

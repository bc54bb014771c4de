"""Memory stores: the embedded SQLite default (created on first use) and how a URL picks one.

A store holds the five kinds of memory and answers the few reads retrieval needs; retrieval
itself works on an in-memory ``Snapshot`` rebuilt only when the store's ``version`` moves.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from lamina import ConfigError, LaminaError
from lamina_memory.records import (
    KIND_OF,
    Chunk,
    Entity,
    EpisodicEvent,
    Memory,
    Pattern,
    Relation,
)


class MemoryStoreError(LaminaError):
    """A store that cannot be opened or reached, or data it refuses (names the store)."""


class Store(Protocol):
    """What retrieval asks of a store."""

    url: str

    def add(self, memories: Iterable[Memory]) -> int: ...

    def version(self) -> int: ...

    def embedding_dim(self) -> int | None: ...

    def events(self) -> list[EpisodicEvent]: ...

    def chunks(self) -> list[Chunk]: ...

    def entities(self) -> list[Entity]: ...

    def relations(self) -> list[Relation]: ...

    def patterns(self) -> list[Pattern]: ...

    def close(self) -> None: ...


SCHEMES = ("sqlite", "postgresql", "postgres", "memory")


def open_store(url: str, *, root: Path | None = None) -> Store:
    """The store a URL names: ``sqlite:///path`` (relative to ``root``), ``memory:`` (SQLite in
    memory) or ``postgresql://…`` (pgvector). Anything else is a ``ConfigError``."""
    scheme, sep, rest = url.partition(":")
    if not sep or scheme not in SCHEMES:
        raise ConfigError(
            f"unknown memory store URL {url!r}; use sqlite:///PATH, memory: or postgresql://…",
            key="plugins.memory.store",
        )
    if scheme == "memory":
        return SQLiteStore(":memory:", url=url)
    if scheme == "sqlite":
        path = rest.removeprefix("//")
        if path.startswith("/") and not rest.startswith("////"):
            path = path[1:]  # sqlite:///rel → rel ; sqlite:////abs → /abs
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = (root or Path.cwd()) / p
        return SQLiteStore(str(p), url=url)
    from lamina_memory.pgstore import PostgresStore

    return PostgresStore(url)


# -- encoding rows -------------------------------------------------------------------------


def ts(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def dt(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


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


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id TEXT PRIMARY KEY, type TEXT NOT NULL, text TEXT NOT NULL, time REAL NOT NULL,
  session TEXT NOT NULL, outcome TEXT, salience REAL NOT NULL, task TEXT, acl TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_session_time ON events(session, time);
CREATE TABLE IF NOT EXISTS chunks (
  id TEXT PRIMARY KEY, text TEXT NOT NULL, time REAL, session TEXT NOT NULL, source TEXT,
  embedding BLOB, salience REAL NOT NULL, acl TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS entities (
  id TEXT PRIMARY KEY, type TEXT NOT NULL, name TEXT NOT NULL, properties TEXT NOT NULL,
  salience REAL NOT NULL, acl TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS relations (
  id TEXT PRIMARY KEY, source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL,
  weight REAL NOT NULL, acl TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS patterns (
  id TEXT PRIMARY KEY, text TEXT NOT NULL, keywords TEXT NOT NULL, intent TEXT NOT NULL,
  successes INTEGER NOT NULL, applications INTEGER NOT NULL, acl TEXT NOT NULL);
"""


class SQLiteStore:
    """The embedded default: one SQLite file (numpy holds the vectors once loaded)."""

    def __init__(self, path: str, *, url: str | None = None) -> None:
        self.url = url or f"sqlite:///{path}"
        self.path = path
        self._lock = threading.Lock()
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False)
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise MemoryStoreError(f"cannot open memory store {self.url!r}: {exc}") from exc
        self._version = 0

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def version(self) -> int:
        with self._lock:
            return int(self._meta("version") or 0)

    def embedding_dim(self) -> int | None:
        with self._lock:
            v = self._meta("dim")
            return None if v is None else int(v)

    def add(self, memories: Iterable[Memory]) -> int:
        """Insert or replace memories (by id) in one transaction; returns how many."""
        import numpy as np

        items = list(memories)
        for m in items:
            if type(m) not in KIND_OF:
                raise MemoryStoreError(f"{self.url}: cannot store {type(m).__name__}")
        with self._lock, self._db:
            chunks = [m for m in items if isinstance(m, Chunk)]
            known = self._meta("dim")
            dim = check_dims(chunks, None if known is None else int(known), self.url)
            if dim is not None and known is None:
                self._db.execute("INSERT INTO meta VALUES ('dim', ?)", (str(dim),))
            seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM chunks").fetchone()[0]
            for m in items:
                acl = json.dumps(list(m.acl))
                if isinstance(m, EpisodicEvent):
                    self._db.execute(
                        "INSERT OR REPLACE INTO events VALUES (?,?,?,?,?,?,?,?,?)",
                        (
                            m.id,
                            m.type,
                            m.text,
                            ts(m.time),
                            m.session,
                            m.outcome,
                            m.salience,
                            m.task,
                            acl,
                        ),
                    )
                elif isinstance(m, Chunk):
                    seq += 1
                    blob = (
                        None
                        if m.embedding is None
                        else np.asarray(m.embedding, dtype=np.float32).tobytes()
                    )
                    self._db.execute(
                        "INSERT OR REPLACE INTO chunks VALUES (?,?,?,?,?,?,?,?,?)",
                        (m.id, m.text, ts(m.time), m.session, m.source, blob, m.salience, acl, seq),
                    )
                elif isinstance(m, Entity):
                    self._db.execute(
                        "INSERT OR REPLACE INTO entities VALUES (?,?,?,?,?,?)",
                        (m.id, m.type, m.name, json.dumps(m.properties), m.salience, acl),
                    )
                elif isinstance(m, Relation):
                    self._db.execute(
                        "INSERT OR REPLACE INTO relations VALUES (?,?,?,?,?,?)",
                        (m.id, m.source, m.target, m.type, m.weight, acl),
                    )
                else:
                    self._db.execute(
                        "INSERT OR REPLACE INTO patterns VALUES (?,?,?,?,?,?,?)",
                        (
                            m.id,
                            m.text,
                            json.dumps(list(m.keywords)),
                            m.intent,
                            m.successes,
                            m.applications,
                            acl,
                        ),
                    )
            v = int(self._meta("version") or 0) + 1
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('version', ?)", (str(v),))
        return len(items)

    def _rows(self, sql: str) -> list[Any]:
        with self._lock:
            return self._db.execute(sql).fetchall()

    def events(self) -> list[EpisodicEvent]:
        return [
            EpisodicEvent(
                id=r[0],
                type=r[1],
                text=r[2],
                time=datetime.fromtimestamp(r[3], UTC),
                session=r[4],
                outcome=r[5],
                salience=r[6],
                task=r[7],
                acl=tuple(json.loads(r[8])),
            )
            for r in self._rows("SELECT * FROM events ORDER BY time, id")
        ]

    def chunks(self) -> list[Chunk]:
        import numpy as np

        return [
            Chunk(
                id=r[0],
                text=r[1],
                time=dt(r[2]),
                session=r[3],
                source=r[4],
                embedding=None
                if r[5] is None
                else tuple(np.frombuffer(r[5], dtype=np.float32).tolist()),
                salience=r[6],
                acl=tuple(json.loads(r[7])),
            )
            for r in self._rows("SELECT * FROM chunks ORDER BY seq")
        ]

    def entities(self) -> list[Entity]:
        return [
            Entity(
                id=r[0],
                type=r[1],
                name=r[2],
                properties=json.loads(r[3]),
                salience=r[4],
                acl=tuple(json.loads(r[5])),
            )
            for r in self._rows("SELECT * FROM entities ORDER BY id")
        ]

    def relations(self) -> list[Relation]:
        return [
            Relation(
                id=r[0],
                source=r[1],
                target=r[2],
                type=r[3],
                weight=r[4],
                acl=tuple(json.loads(r[5])),
            )
            for r in self._rows("SELECT * FROM relations ORDER BY id")
        ]

    def patterns(self) -> list[Pattern]:
        return [
            Pattern(
                id=r[0],
                text=r[1],
                keywords=tuple(json.loads(r[2])),
                intent=r[3],
                successes=r[4],
                applications=r[5],
                acl=tuple(json.loads(r[6])),
            )
            for r in self._rows("SELECT * FROM patterns ORDER BY id")
        ]

    def close(self) -> None:
        with self._lock:
            self._db.close()

"""The PostgreSQL store at scale: the same five tables, chunk vectors in a pgvector column.

Needs ``psycopg`` (the ``postgres`` extra) and a server with the ``vector`` extension (the
store creates the extension if it may). ``nearest`` asks pgvector for the closest chunks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import Any

from lamina import ConfigError
from lamina_memory.records import KIND_OF, Chunk, Entity, EpisodicEvent, Memory, Pattern, Relation
from lamina_memory.store import MemoryStoreError, check_dims

_SCHEMA = """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE IF NOT EXISTS lamina_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lamina_events (
  id TEXT PRIMARY KEY, type TEXT NOT NULL, text TEXT NOT NULL, time TIMESTAMPTZ NOT NULL,
  session TEXT NOT NULL, outcome TEXT, salience DOUBLE PRECISION NOT NULL, task TEXT,
  acl JSONB NOT NULL);
CREATE TABLE IF NOT EXISTS lamina_chunks (
  id TEXT PRIMARY KEY, text TEXT NOT NULL, time TIMESTAMPTZ, session TEXT NOT NULL,
  source TEXT, embedding vector, salience DOUBLE PRECISION NOT NULL, acl JSONB NOT NULL,
  seq BIGSERIAL);
CREATE TABLE IF NOT EXISTS lamina_entities (
  id TEXT PRIMARY KEY, type TEXT NOT NULL, name TEXT NOT NULL, properties JSONB NOT NULL,
  salience DOUBLE PRECISION NOT NULL, acl JSONB NOT NULL);
CREATE TABLE IF NOT EXISTS lamina_relations (
  id TEXT PRIMARY KEY, source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL,
  weight DOUBLE PRECISION NOT NULL, acl JSONB NOT NULL);
CREATE TABLE IF NOT EXISTS lamina_patterns (
  id TEXT PRIMARY KEY, text TEXT NOT NULL, keywords JSONB NOT NULL, intent TEXT NOT NULL,
  successes INTEGER NOT NULL, applications INTEGER NOT NULL, acl JSONB NOT NULL);
"""


def _vec(values: Iterable[float] | None) -> str | None:
    return None if values is None else "[" + ",".join(repr(float(v)) for v in values) + "]"


def _unvec(text: str | None) -> tuple[float, ...] | None:
    return None if text is None else tuple(float(x) for x in text.strip("[]").split(","))


class PostgresStore:
    """Memories in PostgreSQL with pgvector."""

    def __init__(self, url: str, *, connect_timeout: int = 5) -> None:
        self.url = url
        try:
            import psycopg
        except ImportError as exc:
            raise ConfigError(
                "a postgresql:// memory store needs psycopg: install lamina-memory[postgres]",
                key="plugins.memory.store",
            ) from exc
        self._lock = threading.Lock()
        try:
            self._db = psycopg.connect(url, autocommit=False, connect_timeout=connect_timeout)
            with self._db.transaction():
                self._db.execute(_SCHEMA)
        except psycopg.Error as exc:
            raise MemoryStoreError(
                f"cannot reach memory store {_redact(url)!r}: {str(exc).strip()}"
            ) from exc

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM lamina_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def version(self) -> int:
        with self._lock, self._db.transaction():
            return int(self._meta("version") or 0)

    def embedding_dim(self) -> int | None:
        with self._lock, self._db.transaction():
            v = self._meta("dim")
            return None if v is None else int(v)

    def add(self, memories: Iterable[Memory]) -> int:
        """Upsert memories (by id) in one transaction; returns how many."""
        items = list(memories)
        for m in items:
            if type(m) not in KIND_OF:
                raise MemoryStoreError(f"{_redact(self.url)}: cannot store {type(m).__name__}")
        with self._lock, self._db.transaction():
            db = self._db
            db.execute("LOCK TABLE lamina_meta IN EXCLUSIVE MODE")
            known = self._meta("dim")
            dim = check_dims(
                [m for m in items if isinstance(m, Chunk)],
                None if known is None else int(known),
                _redact(self.url),
            )
            if dim is not None and known is None:
                db.execute("INSERT INTO lamina_meta VALUES ('dim', %s)", (str(dim),))
            for m in items:
                acl = json.dumps(list(m.acl))
                if isinstance(m, EpisodicEvent):
                    db.execute(
                        "INSERT INTO lamina_events VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s) "
                        "ON CONFLICT (id) DO UPDATE SET type=EXCLUDED.type, text=EXCLUDED.text, "
                        "time=EXCLUDED.time, session=EXCLUDED.session, outcome=EXCLUDED.outcome, "
                        "salience=EXCLUDED.salience, task=EXCLUDED.task, acl=EXCLUDED.acl",
                        (
                            m.id,
                            m.type,
                            m.text,
                            m.time,
                            m.session,
                            m.outcome,
                            m.salience,
                            m.task,
                            acl,
                        ),
                    )
                elif isinstance(m, Chunk):
                    db.execute(
                        "INSERT INTO lamina_chunks (id, text, time, session, source, embedding, "
                        "salience, acl) VALUES (%s,%s,%s,%s,%s,%s::vector,%s,%s) "
                        "ON CONFLICT (id) DO UPDATE SET text=EXCLUDED.text, time=EXCLUDED.time, "
                        "session=EXCLUDED.session, source=EXCLUDED.source, "
                        "embedding=EXCLUDED.embedding, salience=EXCLUDED.salience, acl=EXCLUDED.acl",
                        (
                            m.id,
                            m.text,
                            m.time,
                            m.session,
                            m.source,
                            _vec(m.embedding),
                            m.salience,
                            acl,
                        ),
                    )
                elif isinstance(m, Entity):
                    db.execute(
                        "INSERT INTO lamina_entities VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (id) "
                        "DO UPDATE SET type=EXCLUDED.type, name=EXCLUDED.name, "
                        "properties=EXCLUDED.properties, salience=EXCLUDED.salience, acl=EXCLUDED.acl",
                        (m.id, m.type, m.name, json.dumps(m.properties), m.salience, acl),
                    )
                elif isinstance(m, Relation):
                    db.execute(
                        "INSERT INTO lamina_relations VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (id) "
                        "DO UPDATE SET source=EXCLUDED.source, target=EXCLUDED.target, "
                        "type=EXCLUDED.type, weight=EXCLUDED.weight, acl=EXCLUDED.acl",
                        (m.id, m.source, m.target, m.type, m.weight, acl),
                    )
                else:
                    db.execute(
                        "INSERT INTO lamina_patterns VALUES (%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (id) "
                        "DO UPDATE SET text=EXCLUDED.text, keywords=EXCLUDED.keywords, "
                        "intent=EXCLUDED.intent, successes=EXCLUDED.successes, "
                        "applications=EXCLUDED.applications, acl=EXCLUDED.acl",
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
            db.execute(
                "INSERT INTO lamina_meta VALUES ('version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                (str(v),),
            )
        return len(items)

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock, self._db.transaction():
            return self._db.execute(sql, params).fetchall()

    def events(self) -> list[EpisodicEvent]:
        return [
            EpisodicEvent(
                id=r[0],
                type=r[1],
                text=r[2],
                time=r[3],
                session=r[4],
                outcome=r[5],
                salience=r[6],
                task=r[7],
                acl=tuple(r[8]),
            )
            for r in self._rows("SELECT * FROM lamina_events ORDER BY time, id")
        ]

    def chunks(self) -> list[Chunk]:
        return [
            Chunk(
                id=r[0],
                text=r[1],
                time=r[2],
                session=r[3],
                source=r[4],
                embedding=_unvec(r[5]),
                salience=r[6],
                acl=tuple(r[7]),
            )
            for r in self._rows(
                "SELECT id, text, time, session, source, embedding::text, salience, acl "
                "FROM lamina_chunks ORDER BY seq"
            )
        ]

    def entities(self) -> list[Entity]:
        return [
            Entity(id=r[0], type=r[1], name=r[2], properties=r[3], salience=r[4], acl=tuple(r[5]))
            for r in self._rows("SELECT * FROM lamina_entities ORDER BY id")
        ]

    def relations(self) -> list[Relation]:
        return [
            Relation(id=r[0], source=r[1], target=r[2], type=r[3], weight=r[4], acl=tuple(r[5]))
            for r in self._rows("SELECT * FROM lamina_relations ORDER BY id")
        ]

    def patterns(self) -> list[Pattern]:
        return [
            Pattern(
                id=r[0],
                text=r[1],
                keywords=tuple(r[2]),
                intent=r[3],
                successes=r[4],
                applications=r[5],
                acl=tuple(r[6]),
            )
            for r in self._rows("SELECT * FROM lamina_patterns ORDER BY id")
        ]

    def nearest(self, vector: Iterable[float], k: int) -> list[tuple[str, float]]:
        """The ``k`` chunks closest to ``vector`` by cosine distance (pgvector ``<=>``)."""
        return [
            (str(r[0]), float(r[1]))
            for r in self._rows(
                "SELECT id, 1 - (embedding <=> %s::vector) FROM lamina_chunks "
                "WHERE embedding IS NOT NULL ORDER BY embedding <=> %s::vector, id LIMIT %s",
                (_vec(vector), _vec(vector), k),
            )
        ]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _redact(url: str) -> str:
    """The URL without its password."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url

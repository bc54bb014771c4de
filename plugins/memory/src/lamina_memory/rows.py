"""The one row mapping of the five kinds of memory, for both dialects: each kind's table and
columns, each column's logical type, and how a value of that type goes to and from a row.

The tables are the same on SQLite and PostgreSQL up to the column types (time as epoch
seconds or ``TIMESTAMPTZ``, JSON as text or ``JSONB``, vectors as float32 bytes or pgvector)
and the table names (``lamina_`` before each on PostgreSQL, where the schema is shared).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from attrs import frozen

from lamina_memory.content import first_problem
from lamina_memory.db import Dialect
from lamina_memory.errors import MemoryStoreError
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

#: Each logical type's SQL: (SQLite, PostgreSQL).
SQL_TYPES: dict[str, tuple[str, str]] = {
    "text": ("TEXT", "TEXT"),
    "real": ("REAL", "DOUBLE PRECISION"),
    "int": ("INTEGER", "INTEGER"),
    "time": ("REAL", "TIMESTAMPTZ"),
    "json": ("TEXT", "JSONB"),
    "strings": ("TEXT", "JSONB"),
    "vector": ("BLOB", "vector"),
    "seq": ("INTEGER", "BIGSERIAL"),
}


@frozen(kw_only=True)
class Column:
    """One column: its name (the record's field of that name), logical type and nullability."""

    name: str
    type: str
    null: bool = False


def _cols(spec: str) -> tuple[Column, ...]:
    """``"id text, time time?"`` → columns (``?``: nullable)."""
    out = []
    for item in spec.split(","):
        name, kind = item.split()
        out.append(Column(name=name, type=kind.rstrip("?"), null=kind.endswith("?")))
    return tuple(out)


@frozen(kw_only=True)
class Table:
    """A kind's table: the record class, its columns in order and how rows are read back."""

    kind: Kind
    name: str
    record: type
    columns: tuple[Column, ...]
    order: str

    def stored(self) -> tuple[Column, ...]:
        """The columns a write sets (``seq`` is the store's, set on first insert only)."""
        return tuple(c for c in self.columns if c.type != "seq")


TABLES: dict[Kind, Table] = {
    t.kind: t
    for t in (
        Table(
            kind="event",
            name="events",
            record=EpisodicEvent,
            columns=_cols(
                "id text, type text, text text, time time, session text, outcome text?, "
                "salience real, task text?, acl strings"
            ),
            order="time, id",
        ),
        Table(
            kind="chunk",
            name="chunks",
            record=Chunk,
            columns=_cols(
                "id text, text text, time time?, session text, source text?, "
                "embedding vector?, salience real, acl strings, seq seq"
            ),
            order="seq",
        ),
        Table(
            kind="entity",
            name="entities",
            record=Entity,
            columns=_cols(
                "id text, type text, name text, properties json, salience real, acl strings"
            ),
            order="id",
        ),
        Table(
            kind="relation",
            name="relations",
            record=Relation,
            columns=_cols("id text, source text, target text, type text, weight real, acl strings"),
            order="id",
        ),
        Table(
            kind="pattern",
            name="patterns",
            record=Pattern,
            columns=_cols(
                "id text, text text, keywords strings, intent text, successes int, "
                "applications int, acl strings"
            ),
            order="id",
        ),
    )
}


class RowMapping:
    """The tables of one dialect: their DDL, statements, and rows to and from records."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.prefix = "lamina_" if dialect == "postgres" else ""
        self._pg = dialect == "postgres"

    def table(self, kind: Kind) -> str:
        return self.prefix + TABLES[kind].name

    @property
    def meta(self) -> str:
        return f"{self.prefix}meta"

    # -- DDL and statements --------------------------------------------------------------

    def schema(self) -> list[str]:
        """The statements that create what is missing (never altering what exists)."""
        out = ["CREATE EXTENSION IF NOT EXISTS vector"] if self._pg else []
        out.append(
            f"CREATE TABLE IF NOT EXISTS {self.meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        for kind, t in TABLES.items():
            cols = ", ".join(
                f"{c.name} {SQL_TYPES[c.type][self._pg]}"
                + ("" if c.null else " NOT NULL")
                + (" PRIMARY KEY" if c.name == "id" else "")
                for c in t.columns
            )
            out.append(f"CREATE TABLE IF NOT EXISTS {self.table(kind)} ({cols})")
        out.append(
            f"CREATE INDEX IF NOT EXISTS {self.prefix}events_session_time "
            f"ON {self.table('event')}(session, time)"
        )
        return out

    def upsert(self, kind: Kind, extra: tuple[tuple[str, str], ...] = ()) -> str:
        """Insert a row, or replace every field of the row with its id (keeping its ``seq``);
        ``extra``: more columns after the kind's own, each with its placeholder."""
        t = TABLES[kind]
        cols = [c.name for c in t.columns] + [name for name, _ in extra]
        marks = ", ".join(
            [
                *("?b::vector" if self._pg and c.type == "vector" else "?" for c in t.columns),
                *(mark for _, mark in extra),
            ]
        )
        sets = ", ".join(
            [f"{c.name} = excluded.{c.name}" for c in t.stored() if c.name != "id"]
            + [f"{name} = excluded.{name}" for name, _ in extra]
        )
        return (
            f"INSERT INTO {self.table(kind)} ({', '.join(cols)}) VALUES ({marks}) "
            f"ON CONFLICT (id) DO UPDATE SET {sets}"
        )

    def select(self, kind: Kind) -> str:
        t = TABLES[kind]
        cols = ", ".join(
            f"{c.name}::text" if self._pg and c.type == "vector" else c.name
            for c in t.columns
            if c.type != "seq"
        )
        return f"SELECT {cols} FROM {self.table(kind)} ORDER BY {t.order}"

    # -- values --------------------------------------------------------------------------

    def row(self, memory: Memory, *, seq: int = 0, where: str) -> tuple[Any, ...]:
        """``memory`` as a row of its table (``seq`` for a chunk); a value no store can hold is
        a ``MemoryStoreError`` naming the memory and the field."""
        kind = KIND_OF.get(type(memory))
        if kind is None:
            raise MemoryStoreError(f"{where}: cannot store {type(memory).__name__}")
        out = []
        for c in TABLES[kind].columns:
            value = seq if c.type == "seq" else getattr(memory, c.name)
            problem = None if c.type == "vector" else first_problem(value)
            if problem is not None:
                path, what = problem
                field = c.name + (path if path.startswith("[") else f".{path}" if path else "")
                raise MemoryStoreError(
                    f"{where}: {kind} {memory.id!r}: field {field} holds {what}; nothing was "
                    "written"
                )
            out.append(self._encode(c.type, value, f"{where}: {kind} {memory.id!r}"))
        return tuple(out)

    def _encode(self, kind: str, value: Any, what: str) -> Any:
        if value is None:
            return None
        if kind == "time":
            return value if self._pg else value.timestamp()
        if kind in ("json", "strings"):
            return json.dumps(list(value) if kind == "strings" else value, allow_nan=False)
        if kind == "vector":
            import numpy as np

            with np.errstate(over="ignore", invalid="ignore"):
                vec = np.asarray(value, dtype=np.float32)
            if not np.isfinite(vec).all():
                raise MemoryStoreError(
                    f"{what}: field embedding holds NaN, an infinity or a value beyond 32-bit "
                    "floats; nothing was written"
                )
            return vec if self._pg else vec.tobytes()  # pgvector's binary format on PostgreSQL
        return value

    def record(self, kind: Kind, row: Sequence[Any]) -> Memory:
        """A record from a row that ``select(kind)`` read."""
        t = TABLES[kind]
        fields = {c.name: self._decode(c.type, v) for c, v in zip(t.stored(), row, strict=True)}
        memory: Memory = t.record(**fields)
        return memory

    def _decode(self, kind: str, value: Any) -> Any:
        if value is None:
            return None
        if kind == "time":
            return value.astimezone(UTC) if self._pg else datetime.fromtimestamp(value, UTC)
        if kind in ("json", "strings"):
            data = value if self._pg else json.loads(value)
            return tuple(data) if kind == "strings" else data
        if kind == "vector":
            if self._pg:
                return tuple(float(x) for x in value.strip("[]").split(","))
            import numpy as np

            return tuple(np.frombuffer(value, dtype=np.float32).tolist())
        return value


def vector_text(values: Sequence[float]) -> str:
    """A vector as pgvector's text input."""
    return "[" + ",".join(repr(float(v)) for v in values) + "]"

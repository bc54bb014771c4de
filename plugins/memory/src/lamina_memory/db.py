"""One connection to a memory store's database, an SQLite file or a PostgreSQL server: its
dialect, its transactions and both drivers' errors, so the store above it is written once."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from lamina import ConfigError
from lamina_memory.errors import MemoryStoreError

Dialect = Literal["sqlite", "postgres"]
#: What ``pg_export_snapshot`` returns (e.g. ``00000003-0000001B-1``).
_SNAPSHOT = re.compile(r"[0-9A-Fa-f]+(-[0-9A-Fa-f]+)+")


def display_name(url: str) -> str:
    """``url`` fit to print: without its password."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def db_errors() -> tuple[type[BaseException], ...]:
    """The driver exceptions that mean "the database failed" (psycopg's only when installed)."""
    errors: list[type[BaseException]] = [sqlite3.Error]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - the postgres extra is optional
        return tuple(errors)
    errors.append(psycopg.Error)
    return tuple(errors)


def explain(exc: BaseException) -> str:
    """A driver error's first line, with its type."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class Database:
    """A connection in autocommit mode; ``read()`` and ``write()`` open the transactions.

    One lock serialises the connection between threads (the service's source threads and a
    host writing memories); across processes the database itself serialises writers.
    """

    def __init__(self, conn: Any, *, dialect: Dialect, name: str) -> None:
        self.conn, self.dialect, self.name = conn, dialect, name
        self.lock = threading.RLock()
        self._depth = 0

    @classmethod
    def sqlite(cls, path: str, *, name: str) -> Database:
        """An SQLite file (its folder created), or ``:memory:``."""
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=5)
            conn.execute("PRAGMA busy_timeout = 5000")
        except (sqlite3.Error, OSError) as exc:
            raise MemoryStoreError(f"cannot open memory store {name!r}: {exc}") from exc
        return cls(conn, dialect="sqlite", name=name)

    @classmethod
    def postgres(cls, url: str, *, connect_timeout: int = 5) -> Database:
        """A PostgreSQL server (needs the ``postgres`` extra)."""
        name = display_name(url)
        try:
            import pgvector.psycopg  # noqa: F401
            import psycopg
        except ImportError as exc:
            raise ConfigError(
                f"a postgresql:// memory store needs {exc.name}: install lamina-memory[postgres]",
                key="plugins.memory.store",
            ) from exc
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout)
        except psycopg.Error as exc:
            raise MemoryStoreError(
                f"cannot reach memory store {name!r}: {str(exc).strip()}"
            ) from exc
        return cls(conn, dialect="postgres", name=name)

    def register_vectors(self) -> None:
        """Vectors to and from pgvector through pgvector-python (binary ``float32`` arrays)."""
        from pgvector.psycopg import register_vector

        with self.lock:
            register_vector(self.conn)

    def close(self) -> None:
        with self.lock, suppress(Exception):  # closing a broken connection
            self.conn.close()

    # -- statements ----------------------------------------------------------------------

    def execute(self, text: str, params: Sequence[Any] = (), *, binary: bool = False) -> Any:
        """Run one statement (``?`` placeholders in either dialect; ``?b`` on PostgreSQL sends
        that parameter in binary, as pgvector's vectors are; ``binary``: PostgreSQL returns
        the results in binary, which loads long arrays several times faster)."""
        if self.dialect == "postgres":
            cur = self.conn.cursor(binary=binary)
            cur.execute(text.replace("?b", "%b").replace("?", "%s"), tuple(params))
            return cur
        return self.conn.execute(text, tuple(params))

    def many(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each of ``rows`` (batched by the driver: psycopg pipelines
        them on PostgreSQL)."""
        if not rows:
            return
        if self.dialect == "postgres":
            cur = self.conn.cursor()
            cur.executemany(text.replace("?b", "%b").replace("?", "%s"), [tuple(r) for r in rows])
            return
        self.conn.executemany(text, [tuple(r) for r in rows])

    def rows(
        self, text: str, params: Sequence[Any] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        # Without binary, execute is called as before it took the flag (tests spy on it).
        cur = self.execute(text, params, binary=True) if binary else self.execute(text, params)
        return [tuple(r) for r in cur.fetchall()]

    def one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        found = self.rows(text, params)
        return found[0] if found else None

    def read_one(
        self, text: str, params: Sequence[Any] = (), *, binary: bool = False
    ) -> tuple[Any, ...] | None:
        """``one`` outside ``read()`` (``read_rows``)."""
        found = self.read_rows(text, params, binary=binary)
        return found[0] if found else None

    def read_rows(
        self, text: str, params: Sequence[Any] = (), *, binary: bool = False
    ) -> list[tuple[Any, ...]]:
        """``rows`` outside ``read()``: a single statement sees one snapshot by itself, so no
        transaction is opened around it (one round trip on PostgreSQL, where ``read()`` adds
        two); inside a ``write()``, it is one of the write's statements. A driver error is
        reported as ``read()`` reports it."""
        with self.lock:
            try:
                return self.rows(text, params, binary=binary)
            except db_errors() as exc:
                raise MemoryStoreError(f"memory store {self.name!r}: {explain(exc)}") from exc

    # -- transactions --------------------------------------------------------------------

    @property
    def writing(self) -> bool:
        """Whether a ``write()`` block is open (its reads see what it wrote so far)."""
        return bool(self._depth)

    def export_snapshot(self) -> str:
        """The snapshot of the PostgreSQL read open on this connection, for another
        connection's ``read(snapshot=...)`` while this one's lasts."""
        found = self.one("SELECT pg_export_snapshot()")
        if found is None:  # pragma: no cover - the function returns one row
            raise MemoryStoreError(f"memory store {self.name!r}: no snapshot to share")
        return str(found[0])

    @contextmanager
    def read(self, *, snapshot: str | None = None) -> Iterator[Database]:
        """One consistent snapshot for the block's reads; ``snapshot`` (PostgreSQL): the one
        another connection exported (``export_snapshot``), so both read the same."""
        with self.lock:
            if self._depth:  # inside a write: read what it has written so far
                yield self
                return
            if snapshot is not None and not _SNAPSHOT.fullmatch(snapshot):
                raise MemoryStoreError(f"memory store {self.name!r}: bad snapshot {snapshot!r}")
            try:
                self.execute(
                    "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                    if self.dialect == "postgres"
                    else "BEGIN"
                )
            except db_errors() as exc:
                raise MemoryStoreError(f"memory store {self.name!r}: {explain(exc)}") from exc
            try:
                if snapshot is not None:  # checked above: hex digits and dashes, inlined
                    self.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
                yield self
            except db_errors() as exc:
                raise MemoryStoreError(f"memory store {self.name!r}: {explain(exc)}") from exc
            finally:
                with suppress(*db_errors()):
                    self.execute("ROLLBACK")

    @contextmanager
    def write(self) -> Iterator[Database]:
        """One transaction: everything in the block is written, or nothing is; a writer in
        another process waits (SQLite's ``BEGIN IMMEDIATE``; on PostgreSQL the store locks)."""
        with self.lock:
            if self._depth:
                yield self
                return
            try:
                self.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
            except db_errors() as exc:
                raise MemoryStoreError(f"memory store {self.name!r}: {explain(exc)}") from exc
            self._depth = 1
            try:
                yield self
                self.execute("COMMIT")
            except BaseException as exc:
                with suppress(*db_errors()):  # the connection itself may have failed
                    self.execute("ROLLBACK")
                if isinstance(exc, db_errors()):
                    raise MemoryStoreError(
                        f"memory store {self.name!r}: nothing was written ({explain(exc)})"
                    ) from exc
                raise
            finally:
                self._depth = 0

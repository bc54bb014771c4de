"""One connection to a ledger database (an SQLite file or a PostgreSQL server) with snapshot
reads, write transactions, versioned migrations and errors that say what went wrong."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from lamina_ledger.errors import LedgerError
from lamina_ledger.schema import APPLICATION, CREATE_META, MIGRATIONS, SCHEMA_VERSION
from lamina_ledger.watch import CommitWatch

#: Serializes concurrent migrations on one PostgreSQL database.
_PG_MIGRATION_LOCK = 7_423_013_001
#: The oldest schema version a reader can read without migrating it.
READABLE_FROM = 1


def is_postgres(target: str) -> bool:
    """Whether ``target`` names a PostgreSQL server rather than an SQLite file."""
    return target.startswith(("postgresql://", "postgres://"))


def display_name(target: str) -> str:
    """``target`` fit to print: a server URL without its password."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", target)


def db_errors() -> tuple[type[BaseException], ...]:
    """The driver exceptions that mean "the database failed" (psycopg only when installed)."""
    errors: list[type[BaseException]] = [sqlite3.Error]
    try:
        import psycopg

        errors.append(psycopg.Error)
    except ImportError:  # pragma: no cover - the postgres extra is optional
        pass
    return tuple(errors)


def explain(exc: BaseException) -> str:
    """A cause for a driver error in words a host can act on."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = text.lower()
    if "database is locked" in lowered or "database table is locked" in lowered:
        return f"the database is locked by another connection ({text})"
    if "readonly database" in lowered or "read-only" in lowered:
        return f"the database is read-only ({text})"
    if "file is not a database" in lowered:
        return "not a ledger: the file is not an SQLite database"
    if "connection" in lowered and ("refused" in lowered or "failed" in lowered):
        return f"the database server is unreachable ({text})"
    return f"{type(exc).__name__}: {text}"


class Database:
    """A connection in autocommit mode; ``read()`` and ``write()`` open the transactions.

    One connection serves one transaction at a time: ``read()``, ``write()`` and ``close()``
    hold ``lock`` (reentrant), so threads sharing a ``Database`` take turns."""

    def __init__(self, conn: Any, *, dialect: str, name: str, readonly: bool) -> None:
        self.conn, self.dialect, self.name, self.readonly = conn, dialect, name, readonly
        self.lock = threading.RLock()
        self.depth = 0  # nesting of write(): inner blocks join the outer transaction
        self.writes = 0  # write transactions begun: what was read before one may be stale
        self.schema_version = SCHEMA_VERSION  # what the open found (a reader may find older)
        self.path: Path | None = None  # an SQLite file's (not for a ``file:`` URI)
        #: Tells whether anything was committed since a mark, without a transaction (an
        #: SQLite file in WAL mode; ``None`` otherwise).
        self.watch: CommitWatch | None = None

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        target: str,
        *,
        readonly: bool = False,
        busy_timeout: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> Database:
        """Connect to ``target``; a writer creates and migrates the ledger, a reader only
        checks it (and never writes, not even the schema)."""
        name = display_name(target)
        try:
            db = (
                cls._open_postgres(target, name, readonly, connect_timeout)
                if is_postgres(target)
                else cls._open_sqlite(target, name, readonly, busy_timeout)
            )
        except LedgerError:
            raise
        except db_errors() as exc:
            raise LedgerError(explain(exc), database=name) from exc
        try:
            db._check_schema()
            db._watch()
        except LedgerError:
            db.close()
            raise
        except db_errors() as exc:
            db.close()
            raise LedgerError(explain(exc), database=name) from exc
        return db

    def _watch(self) -> None:
        """Watch for commits without a transaction (``lamina_ledger.watch``) where that is
        possible: an SQLite file in WAL mode."""
        if (
            self.dialect != "sqlite"
            or self.path is None
            or self.readonly  # (it may not hold the wal-index: see CommitWatch)
            or not CommitWatch.available()
        ):
            return
        mode = self.one("PRAGMA journal_mode")
        if mode is not None and str(mode[0]).lower() == "wal":
            self.watch = CommitWatch(self.path)

    @classmethod
    def _open_sqlite(cls, target: str, name: str, readonly: bool, busy_timeout: float) -> Database:
        if target.startswith("file:"):
            uri, path = target, None
        else:
            path = Path(target).expanduser()
            uri = None
        if readonly:
            if path is not None and not path.is_file():
                raise LedgerError("no ledger here (the file does not exist)", database=name)
            uri = uri or f"{path.resolve().as_uri().replace('file://', 'file:')}?mode=ro"  # type: ignore[union-attr]
        elif path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            uri or str(path),
            uri=uri is not None,
            timeout=busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        db = cls(conn, dialect="sqlite", name=name, readonly=readonly)
        db.path = path.resolve() if path is not None else None
        return db

    @classmethod
    def _open_postgres(
        cls, target: str, name: str, readonly: bool, connect_timeout: float
    ) -> Database:
        try:
            import psycopg
        except ImportError as exc:
            raise LedgerError(
                "a postgresql:// ledger needs psycopg: pip install 'lamina-ledger[postgres]'",
                database=name,
            ) from exc
        conn = psycopg.connect(
            target, autocommit=True, connect_timeout=max(1, round(connect_timeout))
        )
        return cls(conn, dialect="postgres", name=name, readonly=readonly)

    def close(self) -> None:
        with self.lock:
            if self.watch is not None:
                self.watch.close()
            with suppress(Exception):  # closing a broken connection
                self.conn.close()

    # -- statements ----------------------------------------------------------------------

    def sql(self, text: str) -> str:
        """``text`` with ``?`` placeholders in this driver's style."""
        return text.replace("?", "%s") if self.dialect == "postgres" else text

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        if self.dialect == "postgres":
            cur = self.conn.cursor()
            cur.execute(self.sql(text), tuple(params))
            return cur
        return self.conn.execute(text, tuple(params))

    def rows(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.execute(text, params)
        return [tuple(r) for r in cur.fetchall()]

    def one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        found = self.rows(text, params)
        return found[0] if found else None

    # -- transactions --------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Database]:
        """A consistent snapshot for the block's reads (writers appending meanwhile are not seen)."""
        with self.lock:
            if self.depth:  # inside a write: read what it has written so far
                yield self
                return
            with self._snapshot():
                yield self

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        begin = (
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            if self.dialect == "postgres"
            else "BEGIN"
        )
        self.execute(begin)
        try:
            if self.dialect == "sqlite":  # start the snapshot now, not at the first table read
                self.execute("SELECT count(*) FROM sqlite_master")
            yield
        finally:
            self.execute("ROLLBACK")

    @contextmanager
    def write(self) -> Iterator[Database]:
        """One transaction: everything in the block is written, or nothing is."""
        if self.readonly:
            raise LedgerError("opened for reading only; nothing was written", database=self.name)
        with self.lock, self._transaction():
            yield self

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        if self.depth:
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        self.writes += 1
        self.execute("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
        self.depth = 1
        try:
            yield
        except BaseException:
            with suppress(*db_errors()):  # the connection itself may have failed
                self.execute("ROLLBACK")
            raise
        finally:
            self.depth = 0
        self.execute("COMMIT")

    def serialize(self, key: str) -> None:
        """Inside ``write()``: wait until no other transaction holds ``key``, then hold it to
        the end of this one, so writers of one key (a session) take turns. SQLite's
        ``BEGIN IMMEDIATE`` already serializes every writer of the file; PostgreSQL takes a
        transaction-scoped advisory lock."""
        if self.dialect != "postgres":
            return
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        self.execute(
            "SELECT pg_advisory_xact_lock(?)", (int.from_bytes(digest, "big", signed=True),)
        )

    # -- schema --------------------------------------------------------------------------

    def tables(self) -> set[str]:
        if self.dialect == "postgres":
            found = self.rows(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        else:
            found = self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {r[0] for r in found}

    def version(self) -> int:
        """The schema version (0 for an empty database); errors for anything not a ledger."""
        tables = self.tables()
        if "ledger_meta" not in tables:
            if tables - {"sqlite_sequence"}:
                listed = ", ".join(sorted(tables)[:5])
                raise LedgerError(
                    f"not a ledger: the database has tables ({listed}) but no ledger_meta",
                    database=self.name,
                )
            return 0
        meta = dict(self.rows("SELECT key, value FROM ledger_meta"))
        if meta.get("application") != APPLICATION:
            raise LedgerError(
                f"not a ledger: ledger_meta.application is {meta.get('application')!r}, "
                f"expected {APPLICATION!r}",
                database=self.name,
            )
        try:
            return int(meta["schema_version"])
        except (KeyError, ValueError) as exc:
            raise LedgerError(
                "not a ledger: ledger_meta has no valid schema_version", database=self.name
            ) from exc

    def _check_schema(self) -> None:
        version = self.version()
        if version > SCHEMA_VERSION:
            raise LedgerError(
                f"the ledger has schema version {version}, newer than this lamina-ledger "
                f"supports ({SCHEMA_VERSION}); upgrade lamina-ledger",
                database=self.name,
            )
        self.schema_version = version
        if version == SCHEMA_VERSION or (self.readonly and version >= READABLE_FROM):
            return
        if self.readonly:
            raise LedgerError(
                "no ledger here (empty database)"
                if version == 0
                else f"the ledger has schema version {version} and needs migrating to "
                f"{SCHEMA_VERSION}; open it once for writing",
                database=self.name,
            )
        self._migrate()

    def _migrate(self) -> None:
        if self.dialect == "sqlite":
            self.execute("PRAGMA journal_mode = WAL")
        with self.write():
            if self.dialect == "postgres":
                self.execute("SELECT pg_advisory_xact_lock(?)", (_PG_MIGRATION_LOCK,))
            version = self.version()  # again, now that we hold the lock
            if version == 0:
                self.execute(CREATE_META)
                self.execute(
                    "INSERT INTO ledger_meta (key, value) VALUES ('application', ?)",
                    (APPLICATION,),
                )
                self.execute("INSERT INTO ledger_meta (key, value) VALUES ('schema_version', '0')")
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    self.execute(statement)
            self.execute(
                "UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION),),
            )
        self.schema_version = SCHEMA_VERSION

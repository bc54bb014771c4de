"""A throw-away PostgreSQL server for tests, the one way the test suite starts one.

``pgserver`` (a test dependency from PyPI) bundles PostgreSQL with pgvector and needs neither
root nor a system package: ``server_dsn()`` starts a server under a temp dir once per process
(or reuses the one ``$LAMINA_TEST_POSTGRES`` names), ``fresh_database`` and ``fresh_schema``
give each test an empty place on it, and ``postgres_dsn`` is the session-scoped fixture a
plugin's ``conftest.py`` imports::

    from lamina.testing.postgres import postgres_dsn  # noqa: F401
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

__all__ = ["ENV", "fresh_database", "fresh_schema", "postgres_dsn", "server_dsn"]

#: A DSN in this variable is used instead of starting a server (a CI service, say).
ENV = "LAMINA_TEST_POSTGRES"

_started: dict[str, Any] = {}


def server_dsn() -> str:
    """The DSN of the test server: ``$LAMINA_TEST_POSTGRES`` when set, else a server that
    ``pgserver`` starts under a new temp dir on first call in this process (and reuses on the
    next calls); it is stopped and its directory deleted when the process exits."""
    given = os.environ.get(ENV)
    if given:
        return given
    if "dsn" in _started:
        return str(_started["dsn"])
    try:
        from pgserver.postgres_server import get_server
    except ImportError as exc:  # a test dependency: its absence is an error, not a skip
        raise RuntimeError(
            "the PostgreSQL tests need pgserver: pip install pgserver (or set "
            f"{ENV} to a server's DSN)"
        ) from exc
    base = Path(tempfile.mkdtemp(prefix="lamina-pg-"))
    server = get_server(base / "data", cleanup_mode="delete")
    dsn = server.get_uri()
    _tune(dsn)
    _started.update(dsn=dsn, server=server, base=base)
    atexit.register(_stop)
    return dsn


def _tune(dsn: str) -> None:
    """A test server keeps nothing worth an fsync: skip them (reloaded, no restart)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        conn.execute("ALTER SYSTEM SET full_page_writes = off")
        conn.execute("SELECT pg_reload_conf()")


def _stop() -> None:
    server = _started.pop("server", None)
    base = _started.pop("base", None)
    _started.pop("dsn", None)
    if server is not None:
        server.cleanup()
    if base is not None:
        shutil.rmtree(base, ignore_errors=True)


def _replace(dsn: str, *, database: str | None = None, **query: str) -> str:
    """``dsn`` (a ``postgresql://`` URL) with another database name or extra query values."""
    parts = urlsplit(dsn)
    path = f"/{database}" if database is not None else parts.path
    params = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in query]
    params += list(query.items())
    return urlunsplit((parts.scheme, parts.netloc, path, urlencode(params), parts.fragment))


def fresh_database(dsn: str, *, extensions: Sequence[str] = ()) -> str:
    """A new, empty database on ``dsn``'s server with ``extensions`` created (``"vector"``
    for pgvector); returns its DSN."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = _replace(dsn, database=name)
    if extensions:
        with psycopg.connect(url, autocommit=True) as conn:
            for ext in extensions:
                conn.execute(f'CREATE EXTENSION IF NOT EXISTS "{ext}"')
    return url


def fresh_schema(dsn: str) -> str:
    """A DSN whose ``search_path`` is a new, empty schema on ``dsn``'s database (cheaper than
    a database when a test only needs empty tables)."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return _replace(dsn, options=f"-csearch_path={name}")


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """The DSN of a real PostgreSQL server (with pgvector) for this test session."""
    yield server_dsn()

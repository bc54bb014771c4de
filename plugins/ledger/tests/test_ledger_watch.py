"""Between writes, a request knows nothing was committed without asking the database: the
wal-index header of an SQLite ledger in WAL mode moves with every commit by any connection or
process (``lamina_ledger.watch``), and anything the watch cannot vouch for is asked as before."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from lamina_ledger.db import Database
from lamina_ledger.ledger import Ledger
from lamina_ledger.reader import LedgerReader
from lamina_ledger.session import LedgerSession
from lamina_ledger.watch import CommitWatch

from lamina import Message
from lamina.testing import make_assembler

VERSION = (3007000).to_bytes(4, sys.byteorder)


def header(change: int = 1, *, version: bytes = VERSION, init: int = 1) -> bytes:
    """A wal-index header copy: version, unused, change counter, isInit, then zeros."""
    return version + bytes(4) + change.to_bytes(4, sys.byteorder) + bytes([init]) + bytes(35)


def write_shm(path: Path, first: bytes, second: bytes | None = None) -> None:
    Path(f"{path}-shm").write_bytes(first + (first if second is None else second) + bytes(64))


def test_a_mark_holds_until_any_connection_commits(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(str(path)) as ledger:
        ledger.create_session("s")
        watch = ledger.db.watch
        assert watch is not None
        mark = watch.mark()
        assert mark is not None and watch.holds(mark)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("SELECT count(*) FROM turns").fetchall()  # a read commits nothing
        assert watch.holds(mark)
        other.execute("UPDATE sessions SET updated_at = updated_at || 'x'")
        assert not watch.holds(mark)
        mark = watch.mark()
        other.execute("PRAGMA wal_checkpoint(PASSIVE)")
        assert watch.holds(mark)  # copying the log into the database changes no data
        # A checkpoint that empties the log (the header is reset: a mark taken before it no
        # longer holds, which only costs a read), then a commit that starts the log again.
        other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        mark = watch.mark()
        assert mark is not None and watch.holds(mark)
        other.execute("UPDATE sessions SET updated_at = updated_at || 'x'")
        assert not watch.holds(mark)
        other.close()


def test_only_a_read_write_sqlite_file_in_wal_mode_is_watched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(str(path)) as ledger:
        ledger.create_session("s")
        assert ledger.db.watch is not None
        with LedgerReader.open(str(path), readonly=True) as reader:
            assert reader.db.watch is None  # (it may not hold the wal-index)
        uri = f"file:{path}"
        with Ledger.open(uri) as by_uri:
            assert by_uri.db.watch is None
    # A database in another journal mode has no wal-index to watch.
    conn = sqlite3.connect(tmp_path / "plain.db", isolation_level=None, check_same_thread=False)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db = Database(conn, dialect="sqlite", name="plain.db", readonly=False)
    db.path = tmp_path / "plain.db"
    db._watch()
    assert db.watch is None
    db.close()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (header(init=0), None),  # not initialized yet
        (header(version=(3007001).to_bytes(4, sys.byteorder)), None),  # a layout it does not know
        (header(1), header(2)),  # the copies differ: a header being rewritten
    ],
)
def test_a_header_it_cannot_read_gives_no_mark(
    tmp_path: Path, first: bytes, second: bytes | None
) -> None:
    write_shm(tmp_path / "x.db", first, second)
    watch = CommitWatch(tmp_path / "x.db")
    assert watch.mark() is None and not watch.holds(None)
    watch.close()


def test_no_wal_index_a_short_one_or_a_replaced_one(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    watch = CommitWatch(path)
    assert watch.mark() is None  # no -shm file
    Path(f"{path}-shm").write_bytes(header()[:20])
    assert watch.mark() is None  # too short to hold a header
    write_shm(path, header(1))
    mark = watch.mark()
    assert mark is not None and watch.holds(mark)
    write_shm(path, header(2))  # the same file, rewritten in place: seen through the mapping
    assert not watch.holds(mark)
    Path(f"{path}-shm").unlink()
    write_shm(path, header(3))  # another file in its place: the next mark maps it
    assert watch.mark() == header(3) * 2
    watch.close()
    assert not watch.holds(header(3) * 2)


def test_a_request_between_writes_asks_the_database_nothing(
    tmp_path: Path,
    exchange: Callable[..., list[Message]],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    statements: list[str] = []
    a = make_assembler(ledger_config(str(tmp_path / "ledger.db")), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        s.ledger.db.conn.set_trace_callback(statements.append)
        for i in range(6):
            s.record_turn(a.request(f"q{i}"), exchange(i))
            statements.clear()
            ctx = s.assemble(a.request(f"now {i}"))
            if i:  # (the first request reads the history)
                assert statements == []
            assert len(ctx.history) == 4 * (i + 1)
    a.close()


def test_another_processs_append_is_seen_by_the_next_request(
    tmp_path: Path,
    exchange: Callable[..., list[Message]],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    target = str(tmp_path / "ledger.db")
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        s.record_turn(a.request("q0"), exchange(0))
        assert len(s.assemble(a.request("now")).history) == 4
        assert len(s.assemble(a.request("again")).history) == 4  # (now between writes)
        script = textwrap.dedent(
            """
            import sys
            from lamina import Message
            from lamina_ledger.ledger import Ledger
            with Ledger.open(sys.argv[1]) as ledger:
                ledger.append_turn(
                    "s", [Message.of("user", "elsewhere"), Message.of("assistant", "seen")]
                )
            """
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        subprocess.run([sys.executable, "-c", script, target], check=True, env=env)
        ctx = s.assemble(a.request("after"))
        assert [m.text for m in ctx.history[-2:]] == ["elsewhere", "seen"]
    a.close()

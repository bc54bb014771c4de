"""Creating, migrating and recognizing ledgers; locked, read-only and unreachable databases."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger
from lamina_ledger.prefix import Prefix
from lamina_ledger.schema import SCHEMA_VERSION
from lamina_ledger.stats import turn_report

from lamina import Message, Usage
from lamina.testing.postgres import fresh_schema


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_first_use_creates_a_wal_ledger_at_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ledger.db"
    with Ledger.open(str(path)) as w:
        w.append_turn("s", [Message.of("user", "a")])
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(conn.execute("SELECT key, value FROM ledger_meta").fetchall())
    assert meta == {"application": "lamina-ledger", "schema_version": "4"}
    assert SCHEMA_VERSION == 4
    conn.close()


def test_reading_never_modifies_the_files(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(str(path)) as w:
        w.append_turn("s", [Message.of("user", "a")])
        w.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = digest(tmp_path)
    with Ledger.open(str(path), readonly=True) as r:
        r.history("s")
        r.stats("s")
        r.ancestry("s")
    after = digest(tmp_path)
    assert after["ledger.db"] == before["ledger.db"]
    # SQLite may create its WAL index files to read a WAL database; the log stays empty.
    assert set(after) - set(before) <= {"ledger.db-wal", "ledger.db-shm"}
    assert (tmp_path / "ledger.db-wal").stat().st_size == 0 if "ledger.db-wal" in after else True


def test_reader_on_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no ledger here"):
        Ledger.open(str(tmp_path / "none.db"), readonly=True)
    assert list(tmp_path.iterdir()) == []


def _notes(path: Path) -> None:
    path.write_text("just some notes, long enough to look like a header " * 10)


def _invoices(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_notes, "not a ledger: the file is not an SQLite database"),
        (_invoices, r"not a ledger: .*\(invoices\) but no ledger_meta"),
    ],
    ids=["not-sqlite", "other-sqlite"],
)
def test_a_file_that_is_not_a_ledger_is_left_alone(tmp_path: Path, make: Any, says: str) -> None:
    path = tmp_path / "other.db"
    make(path)
    before = path.read_bytes()
    with pytest.raises(LedgerError, match=says):
        Ledger.open(str(path))
    assert path.read_bytes() == before


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Ledger.open(str(path)).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    for readonly in (False, True):
        with pytest.raises(LedgerError, match="schema version 99, newer than .* supports \\(4\\)"):
            Ledger.open(str(path), readonly=readonly)


def test_locked_database_names_session_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(str(path)) as w:
        w.append_turn("s", [Message.of("user", "a")])
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with Ledger.open(str(path), busy_timeout=0.05) as w:
            with pytest.raises(LedgerError) as err:
                w.append_turn("s", [Message.of("user", "b")], turn_id="t-locked")
            msg = str(err.value)
            assert "session 's'" in msg and "turn 't-locked'" in msg and "locked" in msg
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    with Ledger.open(str(path), readonly=True) as r:
        assert len(r.history("s").turns) == 1


def test_read_only_database(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(str(path)) as w:
        w.append_turn("s", [Message.of("user", "a")])
    uri = f"file:{path}?mode=ro"
    with Ledger.open(uri) as w:
        with pytest.raises(LedgerError) as err:
            w.append_turn("s", [Message.of("user", "b")], turn_id="t-ro")
        assert "session 's'" in str(err.value) and "turn 't-ro'" in str(err.value)
        assert "read-only" in str(err.value)
        assert len(w.history("s").turns) == 1


def test_server_down_is_a_clear_error() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://nobody:secret@127.0.0.1:{port}/ledger"
    with pytest.raises(LedgerError) as err:
        Ledger.open(url, connect_timeout=2)
    msg = str(err.value)
    assert "unreachable" in msg and "secret" not in msg and f":{port}/ledger" in msg


def test_postgres_ledger_recognized_and_versioned(postgres_dsn: str) -> None:
    url = fresh_schema(postgres_dsn)
    Ledger.open(url).close()
    with Ledger.open(url) as w:  # a second open finds the ledger and migrates nothing
        assert w.db.version() == SCHEMA_VERSION
        w.db.execute("UPDATE ledger_meta SET value = '7' WHERE key = 'schema_version'")
    with pytest.raises(LedgerError, match="schema version 7, newer"):
        Ledger.open(url, readonly=True)
    other = fresh_schema(postgres_dsn)
    import psycopg

    with psycopg.connect(other, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(LedgerError, match="not a ledger"):
        Ledger.open(other)


#: What schema version 4 added to ``turns``.
V4_COLUMNS = (
    "cost",
    "stop_reason",
    "error",
    "prefix_sha256",
    "prefix_tokens",
    "prefix_base",
    "prefix_blocks",
    "prefix_change",
    "prefix_block",
)


def downgrade(path: Path, version: int) -> None:
    """Take a current ledger back to schema ``version`` (dropping what later ones added)."""
    conn = sqlite3.connect(path)
    for column in V4_COLUMNS:
        conn.execute(f"ALTER TABLE turns DROP COLUMN {column}")
    if version == 3:
        conn.execute("UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'")
        conn.commit()
        conn.close()
        return
    conn.execute("ALTER TABLE sessions DROP COLUMN version")
    conn.execute("ALTER TABLE messages DROP COLUMN content_hash")
    if version < 2:  # no record of which tokenizer counted
        conn.execute("ALTER TABLE turns DROP COLUMN counted_by")
    conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_ledger_is_read_as_it_is_and_migrated_by_a_writer(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "ledger.db"
    with Ledger.open(str(path)) as w:
        w.append_turn("s", [Message.of("user", "a")], total_tokens=1, counted_by="o200k_base")
        stored = w.history("s").turns[0].message_hashes
    downgrade(path, version)
    with Ledger.open(str(path), readonly=True) as r:  # a reader neither refuses nor migrates
        (turn,) = r.history("s").turns
        counted_by = "o200k_base" if version >= 2 else None  # else the kernel counts again
        assert (turn.total_tokens, turn.counted_by) == (1, counted_by)
        assert turn.message_hashes == stored  # computed on first read, the same
        assert r.db.version() == version and r.version("s") is None
        with Ledger.open(str(path)) as w:  # a writer migrates; the old reader keeps reading
            assert w.db.version() == SCHEMA_VERSION
            w.append_turn("s", [Message.of("user", "b")], total_tokens=1, counted_by="o200k_base")
            assert [t.counted_by for t in w.history("s").turns] == [counted_by, "o200k_base"]
            assert w.version("s") == 1
        assert [m.text for t in r.history("s").turns for m in t.messages] == ["a", "b"]


def test_a_version_3_ledger_with_turns_is_read_then_migrated_in_place(target: str) -> None:
    """Schema version 4 (cost, stop reason, error, stable prefix per turn) on a ledger that
    already holds turns and a compaction, on SQLite and PostgreSQL: a reader reads it as it
    is, a writer adds the columns, and nothing written before changes."""
    used = Usage(input_tokens=100, cached_input_tokens=60, output_tokens=5)
    with Ledger.open(target) as w:
        for i in range(3):
            w.append_turn("s", [Message.of("user", f"q{i}")], usage=used, model="gpt-4o")
        w.record_compaction("s", "what happened", None, tokens_before=30, tokens_after=3)
        w.append_turn("s", [Message.of("user", "q3")], usage=used, model="gpt-4o")
        before = w.history("s")
        ancestry = w.ancestry("s")
        for column in V4_COLUMNS:
            w.db.execute(f"ALTER TABLE turns DROP COLUMN {column}")
        w.db.execute("UPDATE ledger_meta SET value = '3' WHERE key = 'schema_version'")
    with Ledger.open(target, readonly=True) as r:
        assert r.db.version() == 3
        old = turn_report(r, "s")
        assert [t.type for t in old.turns] == ["normal"] * 3 + ["compaction", "normal"]
        assert all(t.cost is None and t.prefix_sha256 is None for t in old.turns)
        assert (old.totals.input_tokens, old.totals.cost, old.totals.cache_busts) == (400, None, 0)
    with Ledger.open(target) as w:
        assert w.db.version() == SCHEMA_VERSION == 4
        assert w.history("s") == before and w.ancestry("s") == ancestry
        prefix = Prefix(sha256="a" * 64, tokens=12, blocks=(("rules", "h1", 12),))
        w.append_turn(
            "s",
            [Message.of("user", "q4")],
            usage=used,
            model="gpt-4o",
            stop_reason="end_turn",
            error=None,
            prefix=prefix,
        )
        new = turn_report(w, "s")
    assert [t.cost is None for t in new.turns] == [True] * 5 + [False]
    last = new.turns[-1]
    assert (last.prefix_sha256, last.prefix_tokens, last.stop_reason) == ("a" * 64, 12, "end_turn")
    assert new.totals.turns == 5 and new.totals.input_tokens == 500

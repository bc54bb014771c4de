"""On PostgreSQL the dense search runs alongside the BM25 search: on a second connection, in a
thread, in the snapshot of the first connection's read, so both lists read the same chunks."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from lamina_memory.pgdense import DenseAlongside
from lamina_memory.pgread import ChunkReads
from lamina_memory.records import Chunk
from lamina_memory.store import open_store

from lamina.testing.postgres import fresh_database


@pytest.fixture
def db_url(postgres_dsn: str) -> str:
    return fresh_database(postgres_dsn, extensions=("vector",))


def test_the_dense_search_runs_during_the_lexical_one_in_its_snapshot(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the BM25 search runs, another writer adds the chunk nearest the query vector;
    the dense search then finishes before the BM25 search does (it runs alongside, not
    after it), and does not see that chunk (it reads the BM25 search's snapshot)."""
    store = open_store(db_url)
    store.add(
        [
            Chunk(id=f"c{i:02d}", text=f"apple note {i}", embedding=(1.0, i / 10, 0.5))
            for i in range(20)
        ]
    )
    other = open_store(db_url)
    written, dense_done = threading.Event(), threading.Event()
    real_lexical, real_dense = ChunkReads.lexical, ChunkReads.dense
    real_searcher = DenseAlongside._searcher
    seen: dict[str, Any] = {}

    def lexical(self: ChunkReads, *args: Any, **kw: Any) -> Any:
        other.add([Chunk(id="late", text="apple late", embedding=(0.0, 0.0, 1.0))])
        written.set()
        seen["alongside"] = dense_done.wait(10)
        return real_lexical(self, *args, **kw)

    def searcher(self: DenseAlongside) -> Any:
        written.wait(10)  # the second connection's read begins after the write
        return real_searcher(self)

    def dense(self: ChunkReads, *args: Any, **kw: Any) -> Any:
        try:
            return real_dense(self, *args, **kw)
        finally:
            dense_done.set()

    monkeypatch.setattr(ChunkReads, "lexical", lexical)
    monkeypatch.setattr(ChunkReads, "dense", dense)
    monkeypatch.setattr(DenseAlongside, "_searcher", searcher)
    args = {"who": frozenset(), "since": None, "exclude": frozenset(), "overfetch": 4}
    lexical_hits, dense_hits = store.search_chunks(["appl"], (0.0, 0.0, 1.0), limit=30, **args)
    assert seen["alongside"]
    assert len(dense_hits) == len(lexical_hits) == 20
    assert "late" not in {h.id for h in dense_hits} | {h.id for h in lexical_hits}
    monkeypatch.undo()
    lexical_hits, dense_hits = store.search_chunks(["appl"], (0.0, 0.0, 1.0), limit=30, **args)
    assert dense_hits[0].id == "late" and len(lexical_hits) == 21  # a new read sees it
    other.close()
    store.close()


def test_a_bad_snapshot_is_refused_and_the_connection_stays_usable(db_url: str) -> None:
    """A snapshot name that is not one (it is inlined in SQL) is refused; one the server does
    not know fails as a store error and leaves no transaction open."""
    from lamina_memory.errors import MemoryStoreError

    store = open_store(db_url)
    with pytest.raises(MemoryStoreError, match="bad snapshot"), store.db.read(snapshot="1'; --"):
        pass
    with pytest.raises(MemoryStoreError), store.db.read(snapshot="00000003-0000001B-1"):
        pass
    with store.db.read():
        assert store.db.one("SELECT 1") == (1,)
    store.close()


def test_the_second_connection_opens_with_the_stores_connect_timeout(db_url: str) -> None:
    from lamina_memory.store import PostgresStore

    store = PostgresStore(db_url, connect_timeout=3)
    try:
        assert store._alongside.connect_timeout == 3
    finally:
        store.close()


def test_a_search_reads_the_meta_table_once_and_the_dimension_until_it_is_known(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The BM25 totals come with the query's terms, in their statement; the dense search reads
    the store's dimension until the store has one (none cached while it has none: vectors
    written later are found), then keeps it, as a dimension never changes once set."""
    from lamina_memory.db import Database

    store = open_store(db_url)
    store.add([Chunk(id=f"c{i}", text=f"apple note {i}") for i in range(5)])
    statements: list[str] = []
    real_execute = Database.execute

    def execute(self: Database, text: str, params: Any = (), **kw: Any) -> Any:
        statements.append(text)
        return real_execute(self, text, params, **kw)

    monkeypatch.setattr(Database, "execute", execute)
    args = {"who": frozenset(), "since": None, "exclude": frozenset(), "overfetch": 4}

    def search() -> tuple[int, int, list[str]]:
        statements.clear()
        lexical, dense = store.search_chunks(["appl"], (1.0, 0.0, 0.0), limit=10, **args)
        return len(lexical), len(dense), [s for s in statements if "lamina_meta" in s]

    found, near, meta = search()
    assert (found, near) == (5, 0) and len(meta) == 2 and "'dim'" in meta[0] + meta[1]
    store.add([Chunk(id="v", text="apple vector", embedding=(1.0, 0.0, 0.0))])
    found, near, meta = search()
    assert (found, near) == (6, 1) and len(meta) == 2  # read again: the store had none
    found, near, meta = search()
    assert (found, near) == (6, 1) and len(meta) == 1 and "bm25_docs" in meta[0]
    store.close()

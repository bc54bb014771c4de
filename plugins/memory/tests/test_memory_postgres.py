"""The PostgreSQL + pgvector store, against a real server (pgserver)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from lamina_memory.db import display_name
from lamina_memory.records import Chunk, Entity, EpisodicEvent, Pattern, Relation
from lamina_memory.store import MemoryStoreError, open_store

from lamina.testing.postgres import fresh_database

T = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def db_url(postgres_dsn: str) -> str:
    """A fresh database per test on the session's server, with pgvector."""
    return fresh_database(postgres_dsn, extensions=("vector",))


def test_round_trip_and_versions(db_url: str) -> None:
    store = open_store(db_url)
    items = [
        EpisodicEvent(
            id="e1",
            type="message",
            text="hi",
            time=T,
            session="s",
            outcome="ok",
            salience=0.8,
            acl=("user:ann",),
        ),
        Chunk(id="c1", text="alpha", time=T, embedding=(1.0, 0.0, 0.0)),
        Chunk(id="c2", text="beta", embedding=(0.0, 1.0, 0.0)),
        Entity(id="n1", type="person", name="Ann", properties={"team": "infra"}, salience=0.9),
        Relation(id="r1", source="n1", target="n1", type="self", weight=0.5),
        Pattern(
            id="p1",
            text="run make",
            keywords=("deploy",),
            intent="action",
            successes=1,
            applications=2,
        ),
    ]
    assert store.version() == 0
    store.add(items)
    assert store.version() == 1
    assert store.events() == [items[0]]
    assert store.chunks() == [items[1], items[2]]
    assert store.entities() == [items[3]]
    assert store.relations() == [items[4]]
    assert store.patterns() == [items[5]]
    assert store.embedding_dim() == 3
    # upsert by id
    store.add([Chunk(id="c2", text="beta two", embedding=(0.0, 0.9, 0.1))])
    assert [c.text for c in store.chunks()] == ["alpha", "beta two"]
    assert store.version() == 2
    # pgvector answers nearest-neighbour queries
    assert [i for i, _ in store.nearest((0.0, 1.0, 0.0), 1)] == ["c2"]
    store.close()


def test_dimension_mismatch_is_refused_whole(db_url: str) -> None:
    store = open_store(db_url)
    store.add([Chunk(id="a", text="x", embedding=(1.0, 0.0))])
    with pytest.raises(MemoryStoreError, match=r"chunk 'b' has an embedding of 3 dimensions"):
        store.add([Chunk(id="ok", text="y"), Chunk(id="b", text="y", embedding=(1.0, 0.0, 0.0))])
    assert [c.id for c in store.chunks()] == ["a"]
    store.close()


def test_memory_layer_on_postgres(db_url: str, make: Any) -> None:
    asm, svc = make({"store": db_url})
    svc.add(
        [
            Chunk(id="c1", text="the staging config lives in vault"),
            Chunk(id="c2", text="lunch is at noon"),
        ]
    )
    ctx = asm.assemble(asm.request("where is the staging config?"))
    assert "vault" in ctx.current_message.text and "lunch" not in ctx.current_message.text


def test_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(
        MemoryStoreError,
        match=r"cannot reach memory store 'postgresql://u:\*\*\*@127\.0\.0\.1:1/db'",
    ):
        open_store("postgresql://u:secret@127.0.0.1:1/db")


def test_password_is_redacted() -> None:
    assert display_name("postgresql://u:pw@h/db") == "postgresql://u:***@h/db"
    assert display_name("postgresql://u@h/db") == "postgresql://u@h/db"


def test_dense_search_uses_pgvector_and_agrees_with_the_in_memory_matrix(
    db_url: str, make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lamina_memory.pgsearch import ChunkSearch

    calls: list[int] = []
    real = ChunkSearch.dense

    def spy(self: ChunkSearch, vector: Any, **kw: Any) -> Any:
        calls.append(kw["limit"])
        return real(self, vector, **kw)

    monkeypatch.setattr(ChunkSearch, "dense", spy)
    chunks = [
        Chunk(id="c1", text="the car is parked in bay four"),  # no word in common with the ask
        Chunk(id="c2", text="lunch is served at noon"),
        Chunk(id="c3", text="invoices are due on the first of the month"),
    ]
    found = {}
    for mode in ("store", "memory"):
        asm, svc = make({"store": db_url, "embedder": "minilm", "dense_search": mode})
        if mode == "store":
            svc.add(chunks)  # the embedder fills in each chunk's vector on the way in
        ctx = asm.assemble(asm.request("where did I leave my automobile?"))
        found[mode] = ctx.current_message.text
    assert calls, "dense search did not go through pgvector"
    assert "bay four" in found["store"]
    assert found["store"] == found["memory"]


def test_nearest_uses_the_hnsw_index(db_url: str) -> None:
    store = open_store(db_url)
    store.add([Chunk(id=f"c{i}", text=f"t{i}", embedding=(1.0, float(i), 0.5)) for i in range(50)])
    assert [i for i, _ in store.nearest((1.0, 7.0, 0.5), 1)] == ["c7"]
    with store.db.read():
        store.db.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            str(r[0])
            for r in store.db.rows(
                "EXPLAIN SELECT id FROM lamina_chunks WHERE embedding IS NOT NULL "
                "ORDER BY embedding::vector(3) <=> '[1,7,0.5]'::vector(3) LIMIT 5"
            )
        )
    assert "lamina_chunks_embedding_hnsw" in plan
    store.close()
    again = open_store(db_url)  # an existing store keeps (or gets) its index
    assert [i for i, _ in again.nearest((1.0, 3.0, 0.5), 1)] == ["c3"]
    again.close()


def test_vectors_travel_in_binary(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from lamina_memory.db import Database

    sent: list[tuple[str, tuple[Any, ...]]] = []
    real, real_many = Database.execute, Database.many

    def spy(self: Database, text: str, params: Any = ()) -> Any:
        sent.append((text, tuple(params)))
        return real(self, text, params)

    def spy_many(self: Database, text: str, rows: Any) -> None:
        sent.extend((text, tuple(r)) for r in rows)
        real_many(self, text, rows)

    monkeypatch.setattr(Database, "execute", spy)
    monkeypatch.setattr(Database, "many", spy_many)
    store = open_store(db_url)
    store.add([Chunk(id="c1", text="alpha", embedding=(0.25, 0.5, 1.0))])
    assert [i for i, _ in store.nearest((0.25, 0.5, 1.0), 1)] == ["c1"]
    vectors = [(t, p) for t, p in sent if any(isinstance(x, np.ndarray) for x in p)]
    assert len(vectors) == 2  # the write and the search
    assert all("?b::vector" in t for t, _ in vectors)
    assert not [p for _, p in sent for x in p if isinstance(x, str) and x.startswith("[0.25")]
    assert store.chunks()[0].embedding == (0.25, 0.5, 1.0)
    store.close()


def test_a_lost_connection_is_a_clear_error_on_every_read(db_url: str) -> None:
    """The one-statement reads (version, count, dimension) report a dropped connection as
    the transactions do: a MemoryStoreError naming the store."""
    import psycopg

    store = open_store(db_url)
    store.add([Chunk(id="c1", text="alpha", embedding=(1.0, 0.0))])
    assert (store.version(), store.count(), store.embedding_dim()) == (1, 1, 2)
    pid = store.db.one("SELECT pg_backend_pid()")
    assert pid is not None
    with psycopg.connect(db_url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid[0],))
    for read in (store.version, store.count, store.embedding_dim, store.chunks):
        with pytest.raises(MemoryStoreError, match=r"memory store 'postgresql://"):
            read()
    store.close()

"""On PostgreSQL the neighbours of a query's hits are found in one statement that returns the
seqs and distances of those that count (no row, no text), and only the neighbours kept are
then read in full, in one more statement; the ranking itself is checked against the in-memory
path in test_memory_pg_search.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lamina_memory.db import Database
from lamina_memory.query import Filters
from lamina_memory.records import Chunk
from lamina_memory.store import SQLStore, open_store

from lamina.testing import FakeTokenizer
from lamina.testing.postgres import fresh_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def db_url(postgres_dsn: str) -> str:
    return fresh_database(postgres_dsn, extensions=("vector",))


def test_the_neighbours_of_every_hit_take_one_statement_and_only_those_kept_are_read(
    make: Any, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """48 hits, two neighbours a side: one statement finds all 192 neighbours (as arrays of
    seqs and distances), and one more reads the rows of those kept that are not hits
    themselves (the limit of 50 keeps a few of them)."""
    _asm, svc = make({"store": db_url, "cache_ttl": 0, "neighbours": 2, "semantic_limit": 50})
    # Every fifth chunk a hit, the four between its neighbours (three sessions of 80).
    svc.add(
        [
            Chunk(
                id=f"c{i:03d}",
                text=f"apple note {i}" if i % 5 == 2 else f"other words {i}",
                session=f"s{i // 80}",
            )
            for i in range(240)
        ]
    )
    calls: dict[str, list[tuple[str, int]]] = {"chunks_around": [], "chunks_at": []}
    step: list[str] = []
    returned: dict[str, Any] = {}
    real_execute = Database.execute

    def execute(self: Database, text: str, params: Any = (), **kw: Any) -> Any:
        cur = real_execute(self, text, params, **kw)
        if step:
            calls[step[0]].append((text.split()[0], cur.rowcount))
        return cur

    def spied(name: str) -> Any:
        real = getattr(SQLStore, name)

        def spy(self: SQLStore, *args: Any, **kw: Any) -> Any:
            step.append(name)
            try:
                returned[name] = real(self, *args, **kw)
                return returned[name]
            finally:
                step.clear()

        return spy

    monkeypatch.setattr(Database, "execute", execute)
    for name in calls:
        monkeypatch.setattr(SQLStore, name, spied(name))
    selection, warnings = svc.retrieve(
        text="apple",
        session="s0",
        now=T0,
        who=frozenset(),
        filters=Filters(),
        budget=100_000,
        tokenizer=FakeTokenizer(),
        fmt="markdown",
        sources=("semantic",),
    )
    assert warnings == []
    chosen = [c.source_id for c in selection.chosen]
    assert len(chosen) == 50
    hits = {f"c{i:03d}" for i in range(240) if i % 5 == 2}
    kept_neighbours = [c for c in chosen if c not in hits]
    assert len(hits) == 48 and 0 < len(kept_neighbours) < 50
    # One statement, no transaction around it, its answer one row of arrays
    assert calls["chunks_around"] == [("SELECT", 1)]
    assert [len(x) for x in returned["chunks_around"]] == [48 * 4] * 3
    assert calls["chunks_at"] == [("SELECT", len(kept_neighbours))]


def test_neighbours_count_only_in_the_hits_session_and_when_the_caller_may_see_them(
    db_url: str,
) -> None:
    """The d-th chunk on each side is at distance d whether or not it counts: a hidden chunk or
    one of another session takes its place and is left out; a gap in the store's order (a
    seq a replaced chunk skipped) is no place."""
    store = open_store(db_url)
    chunks = [
        Chunk(
            id=f"c{i}",
            text=f"text {i}",
            session="b" if i >= 6 else "a",
            acl=("ops",) if i == 3 else (),
            time=T0 + timedelta(days=i),
        )
        for i in range(9)
    ]
    store.add(chunks[:5])
    # The replaced chunk keeps its seq and skips the one it was given: a gap before c5.
    store.add([Chunk(id="c1", text="replaced", session="a"), *chunks[5:]])
    with store.db.read():
        seq = {str(i): int(s) for i, s in store.db.rows("SELECT id, seq FROM lamina_chunks")}
    name = {s: i for i, s in seq.items()}
    everyone: dict[str, Any] = dict(who=frozenset(), since=None, exclude=frozenset())

    def around(hits: list[tuple[str, str]], reach: int, **kw: Any) -> list[tuple[str, str, int]]:
        near = store.chunks_around([(seq[i], s) for i, s in hits], reach, **{**everyone, **kw})
        return [(name[h], name[n], d) for h, n, d in zip(*near, strict=True)]

    assert seq["c5"] == seq["c4"] + 2  # the gap
    assert around([("c4", "a"), ("c6", "b")], 3) == [
        ("c4", "c5", 1),  # c3 hidden, c6 in session b
        ("c4", "c2", 2),
        ("c4", "c1", 3),
        ("c6", "c7", 1),  # c5, c4 and c3 in session a
        ("c6", "c8", 2),
    ]
    ops = around([("c4", "a")], 2, who=frozenset({"ops"}))
    assert ops == [("c4", "c3", 1), ("c4", "c5", 1), ("c4", "c2", 2)]
    later = around([("c4", "a")], 2, since=T0 + timedelta(days=2), exclude=frozenset({"c5"}))
    assert later == [("c4", "c2", 2)]
    assert around([], 2) == around([("c4", "a")], 0) == []
    assert {h.id for h in store.chunks_at([seq["c3"], seq["c5"], seq["c1"]], **everyone)} == {
        "c5",
        "c1",
    }
    store.close()

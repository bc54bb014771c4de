"""The SQLite store, store URLs and bulk import: round trips and clear errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from lamina_memory.records import Chunk, Entity, EpisodicEvent, Pattern, Relation
from lamina_memory.store import MemoryStoreError, SQLiteStore, open_store

from lamina import ConfigError

T = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def sample() -> list:
    return [
        EpisodicEvent(
            id="e1",
            type="message",
            text="hello",
            time=T,
            session="s1",
            outcome="success",
            salience=0.8,
            acl=("user:ann",),
        ),
        Chunk(id="c1", text="the staging config", time=T, embedding=(1.0, 0.0, 0.0)),
        Entity(id="n1", type="person", name="Ann", properties={"team": "infra"}, salience=0.9),
        Relation(id="r1", source="n1", target="n1", type="self", weight=0.3),
        Pattern(
            id="p1",
            text="run make",
            keywords=("deploy",),
            intent="action",
            successes=2,
            applications=3,
        ),
    ]


def test_sqlite_file_is_created_on_first_use_and_round_trips(tmp_path: Path) -> None:
    store = open_store("sqlite:///mem/memory.db", root=tmp_path)
    assert (tmp_path / "mem" / "memory.db").is_file()
    assert store.version() == 0
    assert store.add(sample()) == 5
    store.close()
    again = SQLiteStore(str(tmp_path / "mem" / "memory.db"))
    assert again.version() == 1
    assert again.events() == [sample()[0]]
    assert again.chunks() == [sample()[1]]
    assert again.entities() == [sample()[2]]
    assert again.relations() == [sample()[3]]
    assert again.patterns() == [sample()[4]]
    assert again.embedding_dim() == 3
    again.close()


def test_absolute_sqlite_url(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/abs.db")
    store.close()
    assert (tmp_path / "abs.db").is_file()


@pytest.mark.parametrize("url", ["redis://localhost/0", "memory.db", "mongodb://x"])
def test_unknown_url_scheme_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match=r"unknown memory store URL .*sqlite:///PATH"):
        open_store(url)


def test_mismatched_embedding_dimensions_are_refused() -> None:
    store = open_store("memory:")
    store.add([Chunk(id="a", text="x", embedding=(1.0, 0.0))])
    with pytest.raises(
        MemoryStoreError, match=r"chunk 'b' has an embedding of 3 dimensions.*2-dimensional"
    ):
        store.add([Chunk(id="b", text="y", embedding=(1.0, 0.0, 0.0))])
    # nothing of the refused batch was written
    assert [c.id for c in store.chunks()] == ["a"]
    with pytest.raises(MemoryStoreError, match="chunk 'd'"):
        store.add(
            [
                Chunk(id="c", text="p", embedding=(1.0, 0.0)),
                Chunk(id="d", text="q", embedding=(1.0,)),
            ]
        )
    assert [c.id for c in store.chunks()] == ["a"]


def test_unreachable_sqlite_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(MemoryStoreError, match="cannot open memory store"):
        open_store(f"sqlite:///{blocker}/sub/memory.db")


def test_records_validate_their_fields() -> None:
    with pytest.raises(ValueError, match="timezone"):
        EpisodicEvent(id="e", type="t", text="x", time=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match=r"salience must be within"):
        Entity(id="n", type="t", name="x", salience=1.5)
    with pytest.raises(ValueError, match=r"successes \(3\) exceed applications \(2\)"):
        Pattern(id="p", text="x", successes=3, applications=2)
    assert Pattern(id="p", text="x").success_rate == 0.5
    assert Pattern(id="p", text="x", successes=3, applications=3).success_rate == 0.8

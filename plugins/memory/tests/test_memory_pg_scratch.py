"""A PostgreSQL store's BM25 searches reuse one set of arrays for the chunks they have seen
(``pgseen.Scratch``): the same memory from one search to the next, each search finding what a
search with arrays of its own finds."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from lamina_memory.pgseen import Scratch, Seen
from lamina_memory.records import Chunk
from lamina_memory.store import SQLStore, open_store

from lamina.testing.postgres import fresh_database

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


@pytest.fixture
def db_url(postgres_dsn: str) -> str:
    return fresh_database(postgres_dsn, extensions=("vector",))


def search(store: SQLStore, terms: list[str]) -> list[tuple[str, float]]:
    args = {"who": frozenset(), "since": None, "exclude": frozenset()}
    hits, _ = store.search_chunks(terms, None, limit=20, overfetch=1, **args)
    return [(h.id, h.score) for h in hits]


def test_searches_reuse_the_stores_arrays_and_find_what_fresh_ones_find(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lamina_memory.pgtopk as pgtopk

    rng = random.Random(5)
    store = open_store(db_url)
    store.add(
        [
            Chunk(id=f"c{i:03d}", text=" ".join(rng.choices(WORDS, k=rng.randint(2, 9))))
            for i in range(400)
        ]
    )
    queries = [["alpha", "bravo"], ["charlie", "delta", "echo"], ["alpha"], ["golf", "bravo"]]
    assert store.search is not None
    store.search.scratch = None  # type: ignore[assignment]
    fresh = [search(store, q) for q in queries]
    store.search.scratch = Scratch()
    seen: list[Any] = []
    real = pgtopk.TopK._seen_

    def spy(self: Any) -> Seen:
        found = real(self)
        if not seen or seen[-1] is not found:
            seen.append(found)
        return found

    monkeypatch.setattr(pgtopk.TopK, "_seen_", spy)
    assert [search(store, q) for q in queries + queries] == fresh + fresh
    assert len(seen) == 8 and all(s._scratch is store.search.scratch for s in seen)
    first = seen[0]._seqs
    assert all(np.shares_memory(s._seqs, first) for s in seen[1:])  # the same memory
    store.close()


def test_a_search_the_scratch_is_too_small_for_grows_its_own_arrays() -> None:
    """Past ``SCRATCH_BYTES`` a search allocates its own arrays (the map from seq to place is
    still the store's, reset for the next search)."""
    import lamina_memory.pgseen as pgseen

    scratch = Scratch()
    big = Seen(2, scratch)
    seqs = np.arange(1, 3001, dtype=np.int64)
    big.add(0, seqs, np.ones(3000), np.full(3000, 5.0))
    old = pgseen.SCRATCH_BYTES
    pgseen.SCRATCH_BYTES = 1000 * 8 * 5
    try:
        big.update()
    finally:
        pgseen.SCRATCH_BYTES = old
    assert big.n == 3000 and not any(np.shares_memory(big._seqs, f) for f in scratch._flat.values())
    small = Seen(2, scratch)  # the map reset: every chunk new again
    small.add(1, seqs[:10], np.ones(10), np.full(10, 5.0))
    small.update()
    assert small.n == 10 and list(small.seqs) == list(range(1, 11))
    assert small.known.tolist() == [1.0] * 10
    assert int(np.count_nonzero(small._slot)) == 10

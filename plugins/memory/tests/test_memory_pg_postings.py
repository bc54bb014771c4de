"""PostgreSQL's lexical search reads impact-ordered postings best first: the exact top (the
same chunks, order and scores as scoring every chunk holding a query term, with permissions
and filters), after reading a few postings when the answer is found early; every write keeps
the postings, and a store without them gets them when it opens."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from lamina_memory.pgpostings import K1, B
from lamina_memory.records import Chunk
from lamina_memory.signals import analyse
from lamina_memory.store import SQLStore, open_store

from lamina.testing.postgres import fresh_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
#: Words from common to rare (Zipf-like draws), a few of them stemmed alike.
VOCAB = [f"w{i}" for i in range(40)] + ["garden", "gardens", "river", "rivers"]


@pytest.fixture
def db_url(postgres_dsn: str) -> str:
    return fresh_database(postgres_dsn, extensions=("vector",))


def _text(rng: random.Random, length: int) -> str:
    weights = [1 / (i + 1) for i in range(len(VOCAB))]
    return " ".join(rng.choices(VOCAB, weights=weights, k=length))


def brute(
    chunks: list[Chunk], terms: list[str], who: frozenset[str], since: Any, exclude: Any
) -> list[tuple[str, float]]:
    """Every chunk scored as the store's SQL scores it (the same operations in the same
    order), the visible ones with a positive score best first, ties by the chunks' order."""
    docs = [Counter(analyse(c.text)) for c in chunks]
    lengths = [sum(d.values()) for d in docs]
    n = len(chunks)
    avgdl = sum(lengths) / n
    df = Counter(t for d in docs for t in d)
    known = sorted((t for t in dict.fromkeys(terms) if df[t]), key=lambda t: (df[t], t))
    out = []
    for i, (c, d) in enumerate(zip(chunks, docs, strict=True)):
        if c.acl and not set(c.acl) & who:
            continue
        if since is not None and c.time is not None and c.time < since:
            continue
        if c.id in exclude or not any(d[t] for t in known):
            continue
        score = 0.0
        for t in known:
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * d[t] / (d[t] + (K1 * (1 - B) + K1 * B / avgdl * lengths[i]))
        out.append((i, c.id, score))
    out.sort(key=lambda r: (-r[2], r[0]))
    return [(cid, s) for _, cid, s in out]


def search(store: SQLStore, terms: list[str], limit: int, **kw: Any) -> list[tuple[str, float]]:
    args = {"who": frozenset(), "since": None, "exclude": frozenset(), **kw}
    hits, _ = store.search_chunks(terms, None, limit=limit, overfetch=1, **args)
    return [(h.id, h.score) for h in hits]


def test_best_first_gives_exactly_the_top_of_scoring_every_chunk(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small slices, blocks and batches (many rounds), postings packed in several runs (merged,
    some of their postings dead) and the latest in the table, chunks replaced and a corpus
    whose average length moved away from the postings' reference (a second batch twice as
    long), copies (ties), permissions, a date and excluded ids: always the brute-force top."""
    import lamina_memory.pglists as pglists
    import lamina_memory.pgpacked as pgpacked
    import lamina_memory.pgtopk as pgtopk

    monkeypatch.setattr(pglists, "FIRST", 2)
    monkeypatch.setattr(pgtopk, "CHECK_BATCH", 3)
    monkeypatch.setattr(pgpacked, "BLOCK", 3)
    monkeypatch.setattr(pgpacked, "PACK_ROWS", 150)
    rng = random.Random(7)
    chunks = [
        Chunk(
            id=f"c{i:03d}",
            text=_text(rng, rng.randint(2, 12)),
            time=T0 + timedelta(days=i),
            acl=("ops",) if i % 4 == 0 else (),
        )
        for i in range(240)
    ]
    chunks += [Chunk(id=f"d{i:03d}", text=chunks[i].text) for i in range(0, 240, 9)]  # copies
    store = open_store(db_url)
    store.add(chunks[:120])
    longer = [Chunk(id=c.id, text=_text(rng, rng.randint(8, 30)), time=c.time) for c in chunks]
    chunks[120:240] = longer[120:240]
    for at in range(120, len(chunks), 25):  # a run packed by most of these writes
        store.add(chunks[at : at + 25])
    for i in (3, 50, 130):  # replaced: each keeps its place
        chunks[i] = Chunk(id=chunks[i].id, text=_text(rng, 20), time=chunks[i].time)
    store.add([chunks[3], chunks[50], chunks[130]])
    extra = [Chunk(id=f"e{i:02d}", text=_text(rng, 6)) for i in range(40)]
    store.add(extra)  # a small run, not merged with the large one
    for i in (0, 1, 39):  # replaced: their packed postings die, the new ones in the table
        extra[i] = Chunk(id=f"e{i:02d}", text=_text(rng, 6), acl=("ops",))
        store.add([extra[i]])
    chunks += extra
    with store.db.read():
        ref = float(store.db.one("SELECT value FROM lamina_meta WHERE key = 'postings_avgdl'")[0])
        layout = store.db.one(
            "SELECT (SELECT count(DISTINCT run) FROM lamina_chunk_packed), "
            "(SELECT count(*) FROM lamina_chunk_stale), "
            "(SELECT count(*) FROM lamina_chunk_postings)"
        )
    assert layout is not None and layout[0] >= 2 and layout[1] >= 1 and layout[2] >= 1, layout
    assert ref < sum(len(analyse(c.text)) for c in chunks) / len(chunks) * 0.8
    queries = [_text(rng, rng.randint(1, 5)) for _ in range(25)] + ["w0 w1 w2 garden rivers"]
    filters: list[dict[str, Any]] = [
        {},
        {"who": frozenset({"ops"})},
        {"since": T0 + timedelta(days=100), "exclude": frozenset({"c150", "c151", "d009"})},
    ]
    for q in queries:
        terms = analyse(q)
        for kw in filters:
            every = brute(
                chunks,
                terms,
                kw.get("who", frozenset()),
                kw.get("since"),
                kw.get("exclude", frozenset()),
            )
            for limit in (1, 4, 17, 300):
                got = search(store, terms, limit, **kw)
                want = every[:limit]
                assert [i for i, _ in got] == [i for i, _ in want], (q, kw, limit)
                assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)
    store.close()


@pytest.mark.parametrize("packed", [False, True])
def test_a_query_answered_early_reads_few_postings_and_scores_few_chunks(
    db_url: str, monkeypatch: pytest.MonkeyPatch, packed: bool
) -> None:
    """3,000 chunks hold the common term, 5 hold the rare one many times: the top 5 is found
    from the head of each term's postings, not from the 3,000, whether they are in the
    postings table (a slice of each) or packed (a block of each)."""
    import lamina_memory.pglists as pglists
    import lamina_memory.pgpacked as pgpacked

    if packed:
        monkeypatch.setattr(pgpacked, "BLOCK", 32)
        monkeypatch.setattr(pgpacked, "PACK_ROWS", 2000)
    chunks = [Chunk(id=f"c{i:04d}", text=f"common words number {i} here") for i in range(3000)]
    for i in (10, 700, 1400, 2100, 2800):
        chunks[i] = Chunk(id=f"c{i:04d}", text="rare rare rare common")
    store = open_store(db_url)
    store.add(chunks)
    with store.db.read():
        left = store.db.one("SELECT count(*) FROM lamina_chunk_postings")
    assert left is not None and (left[0] == 0) == packed
    searches = spied_searches(monkeypatch)
    terms = analyse("rare common words")
    got = search(store, terms, 5)
    assert [i for i, _ in got] == ["c0010", "c0700", "c1400", "c2100", "c2800"]
    assert [i for i, _ in got] == [i for i, _ in brute(chunks, terms, frozenset(), None, ())][:5]
    (done,) = searches
    assert done.read <= 3 * (32 if packed else pglists.FIRST)  # a slice or block per term
    assert done.scored <= 2 * 5 + 8  # the top and a few more, checked once
    store.db.execute("ANALYZE lamina_chunk_postings")  # as autovacuum would
    with store.db.read():
        plan = "\n".join(
            str(r[0])
            for r in store.db.rows(
                "EXPLAIN SELECT seq FROM lamina_chunk_postings WHERE term = 'common' "
                "ORDER BY impact DESC, seq LIMIT 64"
            )
        )
    assert "lamina_chunk_postings_impact" in plan and "Sort" not in plan
    store.close()


def test_a_threshold_found_early_leaves_the_common_terms_lists_unread(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four common terms (400 chunks each of 4,000, all of one length: flat impacts) and a rare one in
    the 5 chunks that also hold the four, last in the store's order, so the lists' heads hold
    none of their common parts: their sum read so far is far below their score. Scoring them
    early gives a threshold above the common terms' bounds together, so no other chunk can
    reach it and the search ends after one slice per term (reading on until their common
    postings turned up took every list to its end)."""
    import lamina_memory.pglists as pglists

    common = ["alpha", "bravo", "charlie", "delta"]
    chunks = [
        Chunk(
            id=f"c{i:04d}", text=f"{(common + ['other'] * 6)[i % 10]} qq{i}a qq{i}b qq{i}c qq{i}d"
        )
        for i in range(3995)
    ]
    chunks += [Chunk(id=f"r{i}", text="rare alpha bravo charlie delta") for i in range(5)]
    store = open_store(db_url)
    store.add(chunks)
    searches = spied_searches(monkeypatch)
    terms = analyse("rare alpha bravo charlie delta")
    got = search(store, terms, 5)
    assert [i for i, _ in got] == [f"r{i}" for i in range(5)]
    want = brute(chunks, terms, frozenset(), None, ())[:5]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)
    (done,) = searches
    assert done.read <= 5 * pglists.FIRST  # one slice per term, of 4,000 postings
    assert done.scored <= 2 * 5 + 8
    store.close()


def test_chunks_whose_score_the_postings_give_are_not_scored_on_their_rows(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 copies of one text (one score) after 300 other chunks: once every list is read,
    each copy's score is known from its postings, so only the first copies the caller may
    see are checked (the earliest two are hidden from it), not all 300 tied ones."""

    chunks = [Chunk(id=f"o{i:03d}", text=f"alpha other{i} words") for i in range(300)]
    chunks += [
        Chunk(id=f"c{i:03d}", text="alpha beta gamma", acl=("ops",) if i < 2 else ())
        for i in range(300)
    ]
    store = open_store(db_url)
    store.add(chunks)
    searches = spied_searches(monkeypatch)
    terms = analyse("alpha beta gamma")
    got = search(store, terms, 5)
    want = brute(chunks, terms, frozenset(), None, ())[:5]
    assert [i for i, _ in got] == [f"c{i:03d}" for i in range(2, 7)] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)
    (done,) = searches
    assert all(t.done for t in done.terms)
    assert done.scored <= 3 * 5 + 16  # the early threshold's, then a batch: not the 300
    store.close()


def _postings(store: SQLStore) -> list[tuple[Any, ...]]:
    """The live postings, in the table or packed (one of each term and chunk at most)."""
    assert store.search is not None
    with store.db.read():
        rows = store.db.rows("SELECT term, impact, seq, tf, nterms FROM lamina_chunk_postings")
        rows += store.search.postings.packed.live()
    # Impacts are ``real``: compared as float32 (the table's come back as their shortest text).
    found = sorted((r[0], float(np.float32(r[1])), *r[2:]) for r in rows)
    assert len({(r[0], r[2]) for r in found}) == len(found)
    return found


def test_writes_keep_the_postings_as_a_rebuild_makes_them(db_url: str) -> None:
    rng = random.Random(3)
    store = open_store(db_url)
    store.add([Chunk(id=f"c{i}", text=_text(rng, 6)) for i in range(50)])
    store.add(
        [Chunk(id=f"c{i}", text=_text(rng, 9)) for i in (1, 7, 30)]
        + [Chunk(id="c2", text=""), Chunk(id="new", text="w1 w1 garden")]
    )
    kept = _postings(store)
    with store.db.read():
        words = store.db.one("SELECT sum(array_length(terms, 1)) FROM lamina_chunks")
    assert len(kept) == int(words[0])
    with store.db.write():
        assert store.search is not None
        store.search.postings.fill()
    assert _postings(store) == kept
    store.close()


def test_a_store_without_postings_gets_them_when_it_opens(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lamina_memory.pgpostings as pgpostings

    monkeypatch.setattr(pgpostings, "POST_BATCH", 4)
    store = open_store(db_url)
    chunks = [Chunk(id=f"c{i}", text=f"note {i} on the garden") for i in range(10)]
    store.add(chunks)
    before = _postings(store)
    with store.db.write():
        store.db.execute("DROP TABLE lamina_chunk_postings")
        store.db.execute("DELETE FROM lamina_meta WHERE key IN ('postings', 'postings_avgdl')")
    store.close()
    seen: list[tuple[int, int]] = []
    store = open_store(db_url, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 10), (4, 10), (8, 10), (10, 10)]
    assert _postings(store) == before
    assert [i for i, _ in search(store, analyse("garden note 3"), 2)] == ["c3", "c0"]
    store.close()


def test_a_store_with_its_postings_all_in_the_table_packs_them_when_it_opens(
    db_url: str,
) -> None:
    """The previous layout (every posting a row of the table, no packed table): opening the
    store packs them, with progress, and the search reads them packed."""
    store = open_store(db_url)
    chunks = [Chunk(id=f"c{i}", text=f"note {i} on the garden") for i in range(10)]
    store.add(chunks)
    before = _postings(store)
    with store.db.write():
        store.db.execute("DROP TABLE lamina_chunk_packed, lamina_chunk_stale")
        store.db.execute("UPDATE lamina_meta SET value = 'impact-1' WHERE key = 'postings'")
    store.close()
    seen: list[tuple[int, int]] = []
    store = open_store(db_url, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, len(before)), (len(before), len(before))]
    with store.db.read():
        left = store.db.one("SELECT count(*) FROM lamina_chunk_postings")
        layout = store.db.one("SELECT value FROM lamina_meta WHERE key = 'postings'")
    assert left == (0,) and layout == ("impact-2",)
    assert _postings(store) == before
    assert [i for i, _ in search(store, analyse("garden note 3"), 2)] == ["c3", "c0"]
    store.close()


def test_with_a_threshold_only_the_terms_it_needs_are_read_further() -> None:
    """MaxScore: with a threshold of 2.5, the open terms whose bounds add up to less than it
    (the 1.0 term alone) cannot lift an unseen chunk to it, so they are not read further;
    the 1.6 and 2.0 terms are (without a threshold, each at least half the largest bound is:
    all three)."""
    from lamina_memory.pglists import QueryTerm
    from lamina_memory.pgtopk import TopK

    terms = [
        QueryTerm.make(name=name, df=10, idf=1.0, bound=bound, most=None, runs=[])
        for name, bound in (("a", 1.0), ("b", 1.6), ("c", 2.0))
    ]
    search = TopK(
        db=None,  # type: ignore[arg-type]  # _deeper reads no rows
        postings="p",
        packed="k",
        stale_table="s",
        chunks="c",
        terms=terms,
        avgdl=5.0,
        ref=5.0,
        limit=2,
        score=("", []),
        where=("TRUE", []),
    )
    assert search._deeper() == [0, 1, 2]
    search.best = [(3.0, 1), (2.5, 2)]
    assert search._deeper() == [1, 2]
    search.best = [(3.0, 1), (1.2, 2)]  # below 1.0 + 1.6: a and b together can reach it
    assert search._deeper() == [1, 2]
    search.best = [(3.0, 1), (0.9, 2)]  # below every bound: each term is needed
    assert search._deeper() == [0, 1, 2]


def spied_searches(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The searches (``pgtopk.TopK``) run from now on, each kept after it ran (what it read
    and scored)."""
    import lamina_memory.pgtopk as pgtopk

    searches: list[Any] = []
    real = pgtopk.TopK.run

    def spy(self: Any) -> Any:
        searches.append(self)
        return real(self)

    monkeypatch.setattr(pgtopk.TopK, "run", spy)
    return searches

"""On PostgreSQL the store does the retrieval: BM25 over a GIN-indexed ``tsvector`` scored as the
in-memory index scores, permissions and filters in SQL, pgvector's HNSW index for the dense
side, no process holding every chunk; an older store gets its full-text column when it opens."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lamina_memory import cli
from lamina_memory.index import ChunkIndex, Lexical
from lamina_memory.pgsearch import ANALYSER, lexemes
from lamina_memory.query import Filters
from lamina_memory.records import Chunk, Entity
from lamina_memory.rows import RowMapping
from lamina_memory.signals import analyse
from lamina_memory.store import SQLStore, open_store

from lamina.testing import FakeTokenizer
from lamina.testing.postgres import fresh_database

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = [
    "apple",
    "banana",
    "cherry",
    "damson",
    "elder",
    "fig",
    "grape",
    "hazel",
    "iris",
    "juniper",
    "kale",
    "lime",
]


def corpus() -> list[Chunk]:
    """Chunks of different lengths and term frequencies (distinct BM25 scores), two sessions,
    some restricted, some dated, and a replaced one (a gap in the store's order)."""
    out = []
    for i in range(60):
        words = [WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(2 + i % 9)]
        words += [WORDS[i % len(WORDS)]] * (i % 4)
        out.append(
            Chunk(
                id=f"c{i:02d}",
                text=f"note {i}: " + " ".join(words),
                session=f"s{i // 30}",
                time=T0 + timedelta(days=i),
                acl=("ops",) if i % 5 == 0 else (),
            )
        )
    return out


@pytest.fixture
def db_url(postgres_dsn: str) -> str:
    return fresh_database(postgres_dsn, extensions=("vector",))


def retrieve(svc: Any, text: str, who: frozenset[str], filters: Filters | None = None) -> Any:
    selection, warnings = svc.retrieve(
        text=text,
        session="s0",
        now=T0 + timedelta(days=90),
        who=who,
        filters=filters or Filters(),
        budget=4000,
        tokenizer=FakeTokenizer(),
        fmt="markdown",
        sources=("semantic",),
    )
    assert warnings == []
    return [(c.source_id, round(c.relevance, 9)) for c in selection.chosen]


QUERIES = ["apple cherry", "grape grape iris", "kale lime note", "banana", "fig hazel juniper"]
CALLERS = [frozenset(), frozenset({"ops"})]
FILTERS = [
    Filters(),
    Filters(since=T0 + timedelta(days=20), exclude_ids=frozenset({"c31", "c44"})),
]


@pytest.mark.parametrize("neighbours", [0, 2])
def test_postgres_ranks_exactly_as_the_in_memory_index(
    make: Any, db_url: str, neighbours: int
) -> None:
    chunks = corpus()
    replaced = Chunk(id="c07", text="note 7: cherry cherry lime", session="s0")
    results = {}
    for url in ("memory:", db_url):
        _asm, svc = make({"store": url, "cache_ttl": 0, "neighbours": neighbours})
        svc.add(chunks)
        svc.add([replaced])
        assert svc.snapshot().chunks_in_store == (url == db_url)
        results[url] = [
            retrieve(svc, q, who, f) for q in QUERIES for who in CALLERS for f in FILTERS
        ]
    assert results[db_url] == results["memory:"]
    assert all(results[db_url][:4])  # something was found


def test_bm25_scores_match_the_in_memory_scores(db_url: str) -> None:
    chunks = corpus()
    store = open_store(db_url)
    store.add(chunks)
    lexical = Lexical([c.text for c in chunks])
    for q in QUERIES:
        terms = analyse(q)
        hits, _ = store.search_chunks(
            terms,
            None,
            who=frozenset({"ops"}),
            since=None,
            exclude=frozenset(),
            limit=100,
            overfetch=1,
        )
        memory = lexical.scores(terms)
        assert hits
        for h in hits:
            assert h.score == pytest.approx(float(memory[int(h.id[1:])]), rel=1e-5)
    store.close()


def test_permissions_and_filters_apply_in_sql(db_url: str) -> None:
    store = open_store(db_url)
    store.add(corpus())

    def found(who: frozenset[str], **kw: Any) -> set[str]:
        args = {"since": None, "exclude": frozenset(), **kw}
        hits, _ = store.search_chunks(["note"], None, who=who, limit=1000, overfetch=1, **args)
        return {h.id for h in hits}

    everyone = found(frozenset())
    assert everyone == {f"c{i:02d}" for i in range(60) if i % 5}
    assert found(frozenset({"ops", "x"})) == {f"c{i:02d}" for i in range(60)}
    assert found(frozenset(), since=T0 + timedelta(days=50)) == {"c51", "c52", "c53", "c54"} | {
        f"c{i}" for i in range(56, 60)
    }
    assert found(frozenset(), exclude=frozenset({"c01", "c02"})) == everyone - {"c01", "c02"}
    store.close()


def test_the_postgres_path_never_builds_a_snapshot_of_the_chunks(
    make: Any, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No process holds every chunk: reading them all, or building an in-memory chunk index
    with any chunk in it, fails the test."""
    real_read = SQLStore._read

    def read(self: SQLStore, kind: Any) -> Any:
        assert kind != "chunk", "the PostgreSQL path read every chunk"
        return real_read(self, kind)

    real_index = ChunkIndex.__init__

    def index(self: ChunkIndex, chunks: Any, **kw: Any) -> None:
        assert not chunks, "the PostgreSQL path built an in-memory chunk index"
        real_index(self, chunks, **kw)

    asm, svc = make({"store": db_url, "cache_ttl": 0, "neighbours": 1})
    svc.add(corpus())
    monkeypatch.setattr(SQLStore, "_read", read)
    monkeypatch.setattr(ChunkIndex, "__init__", index)
    text = asm.assemble(asm.request("apple cherry")).current_message.text
    assert "apple" in text
    svc.add([Chunk(id="new", text="the quince is ripe")])  # streamed: only the version moves
    svc.add([Entity(id="n", type="fruit", name="Quince")])  # rebuilt: without the chunks
    assert "quince is ripe" in asm.assemble(asm.request("quince ripe")).current_message.text


def _recount(store: SQLStore) -> tuple[dict[str, int], int, int]:
    db = store.db
    with db.read():
        df = {
            str(w): int(n)
            for w, n in db.rows(
                "SELECT word, ndoc FROM ts_stat('SELECT lexemes FROM lamina_chunks')"
            )
        }
        n, length = db.rows("SELECT count(*), COALESCE(sum(nterms), 0) FROM lamina_chunks")[0]
    return df, int(n), int(length)


def test_term_counts_follow_inserts_and_replacements(db_url: str) -> None:
    store = open_store(db_url)
    store.add(corpus())
    store.add(
        [
            Chunk(id="c03", text="cherry only"),
            Chunk(id="c04", text=""),
            Chunk(id="x", text="it's Bob's O'Neil \\ back'slash"),
            Chunk(id="x", text="repeated id: the last one wins wins"),
        ]
    )
    df, n, length = _recount(store)
    with store.db.read():
        kept = {str(t): int(d) for t, d in store.db.rows("SELECT term, df FROM lamina_chunk_terms")}
        docs = store.db.one("SELECT value FROM lamina_meta WHERE key = 'bm25_docs'")
        total = store.db.one("SELECT value FROM lamina_meta WHERE key = 'bm25_length'")
    assert kept == df
    with store.db.read():
        bounds = store.db.rows(
            "SELECT t.term, t.max_tf, t.min_len, max(u.tf), min(c.nterms) "
            "FROM lamina_chunk_terms t JOIN lamina_chunks c ON t.term = ANY(c.terms) "
            "CROSS JOIN LATERAL unnest(c.terms, c.tfs) AS u(term, tf) WHERE u.term = t.term "
            "GROUP BY t.term, t.max_tf, t.min_len"
        )
    assert len(bounds) == len(df)
    assert all(most >= tf and shortest <= length for _, most, shortest, tf, length in bounds)
    assert (int(docs[0]), int(total[0])) == (n, length) == (61, length)
    assert store.count() == 61
    store.close()


def test_lexemes_keep_term_frequency_and_quote_awkward_terms() -> None:
    made = lexemes(["it's", "a\\b", "x", "x", "x"])
    assert made.vector == "'it''s':1 'a\\\\b':1 'x':1,2,3"
    assert made.length == 5 and made.terms == ("it's", "a\\b", "x")
    assert made.tfs == (1, 1, 3)
    assert lexemes(["y"] * 300).vector.count(",") == 255  # PostgreSQL keeps 256 positions


def _make_old_store(url: str, n: int) -> None:
    """A store as versions without store-side search wrote it: no ``lexemes`` or ``nterms``
    columns, no term table, no GIN index."""
    store = open_store(url)
    store.add([Chunk(id=f"o{i}", text=f"old note {i} about {WORDS[i % 12]}") for i in range(n)])
    db = store.db
    with db.write():
        db.execute("DROP INDEX lamina_chunks_lexemes_gin")
        db.execute(
            "ALTER TABLE lamina_chunks DROP COLUMN lexemes, DROP COLUMN terms, "
            "DROP COLUMN tfs, DROP COLUMN nterms"
        )
        db.execute("DROP TABLE lamina_chunk_terms")
        db.execute("DELETE FROM lamina_meta WHERE key IN ('analyser', 'bm25_docs', 'bm25_length')")
    store.close()


def test_an_older_postgres_store_is_migrated_when_it_opens(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lamina_memory.pgsearch as pgsearch

    monkeypatch.setattr(pgsearch, "MIGRATE_BATCH", 7)
    _make_old_store(db_url, 20)
    seen: list[tuple[int, int]] = []
    store = open_store(db_url, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 20), (7, 20), (14, 20), (20, 20)]
    with store.db.read():
        assert store.db.one("SELECT value FROM lamina_meta WHERE key = 'analyser'") == (ANALYSER,)
        indexes = {str(r[0]) for r in store.db.rows("SELECT indexname FROM pg_indexes")}
    assert "lamina_chunks_lexemes_gin" in indexes
    df, n, _length = _recount(store)
    assert n == 20 and df["old"] == 20 and df["appl"] == 2
    hits, _ = store.search_chunks(
        analyse("apple"),
        None,
        who=frozenset(),
        since=None,
        exclude=frozenset(),
        limit=5,
        overfetch=1,
    )
    assert {h.id for h in hits} == {"o0", "o12"}
    store.close()
    seen.clear()
    open_store(db_url, progress=lambda done, total: seen.append((done, total))).close()
    assert seen == []  # migrated once


def test_the_full_text_index_is_used(db_url: str) -> None:
    store = open_store(db_url)
    store.add(corpus())
    with store.db.read():
        store.db.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            str(r[0])
            for r in store.db.rows(
                "EXPLAIN SELECT id FROM lamina_chunks WHERE lexemes @@ 'appl'::tsquery"
            )
        )
    assert "lamina_chunks_lexemes_gin" in plan
    store.close()


def _cli_store(tmp_path: Path, url: str) -> Path:
    config = tmp_path / "lamina.toml"
    config.write_text(f'model = "gpt-4o"\n[plugins.memory]\nstore = "{url}"\nembedder = "none"\n')
    return config


def test_reindex_shows_progress_on_a_terminal(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lamina_memory.pgsearch as pgsearch

    monkeypatch.setattr(pgsearch, "MIGRATE_BATCH", 10)
    store = open_store(db_url)
    store.add([Chunk(id=f"c{i}", text=f"note {i}") for i in range(25)])
    store.close()
    monkeypatch.setattr(cli, "interactive", lambda: True)
    out = CliRunner().invoke(cli.memory_group, ["reindex", "-c", str(_cli_store(tmp_path, db_url))])
    assert out.exit_code == 0, out.output
    assert out.stderr.startswith("\rlamina: memory index: 0 of 25 chunks")
    assert re.search(r"\rlamina: memory index: 25 of 25 chunks, [\d,.]+/s\n$", out.stderr)
    assert out.stdout.endswith("reindexed 25 chunks\n")


def test_opening_an_older_store_shows_progress_and_is_quiet_into_a_pipe(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make_old_store(db_url, 12)
    config = _cli_store(tmp_path, db_url)
    monkeypatch.setattr(cli, "interactive", lambda: False)
    quiet = CliRunner().invoke(cli.memory_group, ["stats", "-c", str(config)])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert "chunks: 12" in quiet.stdout
    _make_old_store(db_url, 12)
    monkeypatch.setattr(cli, "interactive", lambda: True)
    shown = CliRunner().invoke(cli.memory_group, ["stats", "-c", str(config)])
    assert shown.exit_code == 0
    assert re.fullmatch(r"(\rlamina: memory index: \d+ of 12 chunks[^\r]*)*\n", shown.stderr), (
        shown.stderr
    )
    assert "\rlamina: memory index: 12 of 12 chunks" in shown.stderr


def test_reindex_on_sqlite_says_there_is_nothing_to_do(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        cli.memory_group, ["reindex", "-c", str(_cli_store(tmp_path, "sqlite:///m.db"))]
    )
    assert out.exit_code == 0 and "nothing to rebuild" in out.stdout


def test_row_mapping_extra_columns() -> None:
    sql = RowMapping("postgres").upsert("chunk", (("lexemes", "?::tsvector"),))
    assert "lexemes = excluded.lexemes" in sql and sql.count("?::tsvector") == 1


def test_dense_search_asks_again_when_permissions_leave_too_few(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lamina_memory.db import Database

    store = open_store(db_url)
    store.add(
        [
            Chunk(id=f"c{i:03d}", text=f"t{i}", embedding=(1.0, i / 100, 0.5), acl=acl)
            for i in range(150)
            for acl in [("ops",) if i % 10 else ()]
        ]
    )
    asked: list[str] = []
    real = Database.execute

    def spy(self: Database, text: str, params: Any = ()) -> Any:
        if "hnsw.ef_search" in text:
            asked.append(params[0])
        return real(self, text, params)

    monkeypatch.setattr(Database, "execute", spy)
    args = {"since": None, "exclude": frozenset(), "limit": 50, "overfetch": 4}
    _, ops = store.search_chunks([], (1.0, 0.0, 0.5), who=frozenset({"ops"}), **args)
    assert asked == ["62"] and [h.id for h in ops][:3] == ["c000", "c001", "c002"]
    asked.clear()
    _, anyone = store.search_chunks([], (1.0, 0.0, 0.5), who=frozenset(), **args)
    assert asked == ["62", "200"]  # 15 public chunks of 150: the first scan finds 7
    assert [h.id for h in anyone] == [f"c{i:03d}" for i in range(0, 150, 10)]
    store.close()

"""Chunk retrieval inside PostgreSQL: BM25 over a ``tsvector`` column with a GIN index, pgvector's
HNSW index for the dense neighbours, the caller's permissions and filters in the SQL, so no
process holds every chunk.

Each chunk's ``lexemes`` are the terms of Lamina's own analyser (``signals.analyse``: the stop
words and Snowball stems the in-memory BM25 uses), written as a ``tsvector`` whose positions
1..tf count each term, which the GIN index matches; ``terms`` and ``tfs`` hold the same distinct
terms and their frequencies as arrays, which a query scores from (``array_position`` costs a
fraction of unnesting the ``tsvector`` per row); ``nterms`` is the text's length in terms.
``lamina_chunk_terms`` keeps each term's
document frequency and the meta table the corpus size and total length, updated by every write,
so a query computes BM25 exactly as ``bm25s``'s Lucene variant does in memory (same idf, same
term-frequency part). A store written before these columns existed gets them when it opens: the
texts are analysed again in batches (``progress`` counts them), then the GIN index is built.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from attrs import frozen

from lamina_memory.db import Database
from lamina_memory.signals import analyse

#: The analyser the stored lexemes were made with; another value re-analyses every text.
ANALYSER = "snowball-english-1"
K1, B = 1.5, 0.75
#: PostgreSQL's limits: positions per lexeme, bytes per lexeme, bytes per tsvector.
_MAX_TF, _MAX_LEXEME, _MAX_VECTOR = 256, 2046, 1_000_000
#: Rows above this many bytes move their vector out of line (``toast_tuple_target``).
_ROW_TARGET = 1024
#: Texts analysed per batch when a store is migrated or re-indexed.
MIGRATE_BATCH = 5_000
#: Postings (chunks holding a term) scored in the first round of a lexical search.
_CHEAP_POSTINGS = 2_000
#: The most neighbours pgvector's HNSW scan may return (``hnsw.ef_search`` at most 1,000).
_EF_MAX = 1_000

Progress = Callable[[int, int], None]


@frozen(kw_only=True)
class Hit:
    """One chunk a store-side search found, with what a candidate needs of it."""

    id: str
    seq: int
    session: str
    text: str
    time: datetime | None
    salience: float
    score: float = 0.0
    visible: bool = True


def _quote(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


@frozen(kw_only=True)
class Analysed:
    """A text as the store indexes it: its ``tsvector`` literal (positions 1..tf, so the term
    frequency survives, at most 256 per term as PostgreSQL allows), its length in terms and
    the distinct terms the literal holds."""

    vector: str
    length: int
    terms: tuple[str, ...]
    tfs: tuple[int, ...]


def lexemes(terms: Sequence[str]) -> Analysed:
    """``terms`` (analysed) as the store indexes them."""
    tf = Counter(t for t in terms if len(t.encode("utf-8")) <= _MAX_LEXEME)
    parts: list[str] = []
    kept: list[str] = []
    tfs: list[int] = []
    size = 0
    for term, n in tf.items():
        part = f"{_quote(term)}:{','.join(str(i) for i in range(1, min(n, _MAX_TF) + 1))}"
        size += len(part.encode("utf-8")) + 8
        if size > _MAX_VECTOR:  # a text of megabytes: its remaining terms are not indexed
            break
        parts.append(part)
        kept.append(term)
        tfs.append(n)
    return Analysed(vector=" ".join(parts), length=len(terms), terms=tuple(kept), tfs=tuple(tfs))


def columns(a: Analysed) -> tuple[str, list[str], list[int], int]:
    """The chunk row's ``lexemes``, ``terms``, ``tfs`` and ``nterms`` values."""
    return a.vector, list(a.terms), list(a.tfs), a.length


def analysed(text: str) -> Analysed:
    """``text`` through Lamina's analyser, as the store indexes it."""
    return lexemes(analyse(text))


def tsquery(terms: Iterable[str]) -> str:
    """Any of ``terms``, as a ``tsquery`` literal (already analysed: no stemming here)."""
    return " | ".join(_quote(t) for t in terms)


class ChunkSearch:
    """The SQL of store-side retrieval for one store's tables (``prefix``: ``lamina_``)."""

    def __init__(self, db: Database, prefix: str) -> None:
        self.db = db
        self.chunks = f"{prefix}chunks"
        self.terms = f"{prefix}chunk_terms"
        self.meta = f"{prefix}meta"
        self.prefix = prefix

    # -- schema and migration ---------------------------------------------------------------

    def ensure(self, progress: Progress | None = None) -> None:
        """Add what store-side retrieval needs to a store that lacks it (inside the schema's
        transaction): the columns, the term table, analysed texts, the GIN and seq indexes."""
        db, p = self.db, self.prefix
        db.execute(
            f"ALTER TABLE {self.chunks} ADD COLUMN IF NOT EXISTS lexemes tsvector, "
            "ADD COLUMN IF NOT EXISTS terms TEXT[], ADD COLUMN IF NOT EXISTS tfs INTEGER[], "
            "ADD COLUMN IF NOT EXISTS nterms INTEGER"
        )
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.terms} (term TEXT PRIMARY KEY, df INTEGER NOT NULL)"
        )
        db.execute(f"CREATE INDEX IF NOT EXISTS {p}chunks_seq ON {self.chunks}(seq)")
        # Vectors out of line (above 1 kB a row moves its vector to the TOAST table first):
        # a row stays a few hundred bytes with its text, terms and frequencies inline, so
        # the full-text search reads few pages per match (pgvector's HNSW index keeps its own
        # copy of each vector). Rows written before keep their layout until rewritten.
        options = db.one(
            "SELECT reloptions FROM pg_class WHERE oid = to_regclass(?)", (self.chunks,)
        )
        if not options or f"toast_tuple_target={_ROW_TARGET}" not in (options[0] or []):
            db.execute(
                f"ALTER TABLE {self.chunks} ALTER COLUMN embedding SET STORAGE EXTERNAL, "
                f"SET (toast_tuple_target = {_ROW_TARGET})"
            )
        if self._meta("analyser") != ANALYSER:
            self.reanalyse(progress)
        db.execute(
            f"CREATE INDEX IF NOT EXISTS {p}chunks_lexemes_gin ON {self.chunks} USING gin (lexemes)"
        )

    def reanalyse(self, progress: Progress | None = None) -> int:
        """Analyse every chunk's text again, in batches of ``MIGRATE_BATCH`` (never all of them
        in memory), then count the terms again; returns how many chunks."""
        db = self.db
        found = db.one(f"SELECT count(*) FROM {self.chunks}")
        total = int(found[0]) if found else 0
        done, last = 0, -1
        if progress is not None:
            progress(0, total)
        while True:
            rows = db.rows(
                f"SELECT seq, id, text FROM {self.chunks} WHERE seq > ? ORDER BY seq LIMIT ?",
                (last, MIGRATE_BATCH),
            )
            if not rows:
                break
            done_rows = [(analysed(str(text)), str(cid)) for _seq, cid, text in rows]
            params = [(*columns(a), cid) for a, cid in done_rows]
            db.many(
                f"UPDATE {self.chunks} SET lexemes = ?::tsvector, terms = ?::text[], "
                "tfs = ?::int[], nterms = ? WHERE id = ?",
                params,
            )
            last = int(rows[-1][0])
            done += len(rows)
            if progress is not None:
                progress(done, total)
        db.execute(f"DELETE FROM {self.terms}")
        db.execute(
            f"INSERT INTO {self.terms} (term, df) SELECT word, ndoc FROM "
            f"ts_stat('SELECT lexemes FROM {self.chunks} WHERE lexemes IS NOT NULL')"
        )
        length = db.one(f"SELECT COALESCE(SUM(nterms), 0) FROM {self.chunks}")
        self._set_meta("bm25_docs", str(total))
        self._set_meta("bm25_length", str(int(length[0]) if length else 0))
        self._set_meta("analyser", ANALYSER)
        return total

    def _meta(self, key: str) -> str | None:
        row = self.db.one(f"SELECT value FROM {self.meta} WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            f"INSERT INTO {self.meta} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- writes ---------------------------------------------------------------------------

    def count_terms(self, written: dict[str, Analysed]) -> None:
        """Move the term counts and corpus totals by a write of ``written`` (chunk id → its new
        analysed text), read before the rows change: a replaced chunk's old terms leave."""
        db = self.db
        df: Counter[str] = Counter()
        docs, length = 0, 0
        old = {
            str(r[0]): (r[1] or [], int(r[2] or 0))
            for r in db.rows(
                f"SELECT id, terms, nterms FROM {self.chunks} WHERE id = ANY(?)",
                (list(written),),
            )
        }
        for cid, new in written.items():
            prior = old.get(cid)
            if prior is None:
                docs += 1
            else:
                df.subtract(prior[0])
                length -= prior[1]
            df.update(new.terms)
            length += new.length
        moved = [(t, d) for t, d in df.items() if d]
        if moved:
            db.execute(
                f"INSERT INTO {self.terms} (term, df) SELECT * FROM unnest(?::text[], ?::int[]) "
                f"ON CONFLICT (term) DO UPDATE SET df = {self.terms}.df + excluded.df",
                ([t for t, _ in moved], [d for _, d in moved]),
            )
            if any(d < 0 for _, d in moved):
                db.execute(f"DELETE FROM {self.terms} WHERE df <= 0")
        self._set_meta("bm25_docs", str(int(self._meta("bm25_docs") or 0) + docs))
        self._set_meta("bm25_length", str(int(self._meta("bm25_length") or 0) + length))

    # -- reads (inside the caller's read transaction) ---------------------------------------

    def count(self) -> int:
        """How many chunks the store holds (from the totals, not a scan)."""
        return int(self._meta("bm25_docs") or 0)

    def _filters(
        self, who: frozenset[str], since: datetime | None, exclude: frozenset[str]
    ) -> tuple[str, list[Any]]:
        """The caller's permissions and the request's filters as SQL over ``c``."""
        sql = ["(c.acl = '[]'::jsonb OR jsonb_exists_any(c.acl, ?::text[]))"]
        params: list[Any] = [sorted(who)]
        if since is not None:
            sql.append("(c.time IS NULL OR c.time >= ?)")
            params.append(since)
        if exclude:
            sql.append("NOT (c.id = ANY(?::text[]))")
            params.append(sorted(exclude))
        return " AND ".join(sql), params

    def lexical(
        self,
        terms: Sequence[str],
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
        limit: int,
    ) -> list[Hit]:
        """The ``limit`` best chunks by BM25 (Lucene's variant, as ``bm25s`` scores in memory)
        among those the caller may see, best first, ties by the chunks' order.

        Exact top-k without scoring every chunk that holds a common term (MaxScore): the
        terms are taken rarest first; the chunks holding the terms taken so far are scored
        on every term, and once the ``limit``-th best score reaches the most a chunk holding
        none of them could score (the sum of the other terms' idf: a term's frequency part is
        below 1), no other chunk can enter the top.
        """
        unique = list(dict.fromkeys(terms))
        if not unique or limit <= 0:
            return []
        db = self.db
        n = max(self.count(), 1)
        total = int(self._meta("bm25_length") or 0)
        avgdl = total / n if total else 1.0
        known = sorted(
            (
                (str(t), int(d))
                for t, d in db.rows(
                    f"SELECT term, df FROM {self.terms} WHERE term = ANY(?)", (unique,)
                )
            ),
            key=lambda td: (td[1], td[0]),
        )
        if not known:
            return []
        names = [t for t, _ in known]
        idf = [math.log(1 + (n - d + 0.5) / (d + 0.5)) for _, d in known]
        where, params = self._filters(who, since, exclude)
        # BM25 of each term: idf × tf / (tf + k1 × (1 - b + b × nterms / avgdl)), the term's
        # frequency read from the arrays (0 where the chunk lacks it).
        tf = "COALESCE(c.tfs[array_position(c.terms, ?::text)], 0)"
        norm = "(?::float8 + ?::float8 * c.nterms)"
        parts, score_params = [], []
        for term, weight in zip(names, idf, strict=True):
            parts.append(f"?::float8 * {tf} / ({tf} + {norm})")
            score_params += [weight, term, term, K1 * (1 - B), K1 * B / avgdl]
        sql = (
            f"SELECT c.id, c.seq, c.session, c.text, c.time, c.salience, s.score "
            f"FROM {self.chunks} c CROSS JOIN LATERAL (SELECT {' + '.join(parts)} AS score) s "
            f"WHERE c.lexemes @@ ?::tsquery AND {where} ORDER BY s.score DESC, c.seq LIMIT ?"
        )
        # Start with the rare terms whose chunks are cheap to score, then widen.
        taken, postings = 1, known[0][1]
        while taken < len(known) and postings + known[taken][1] <= _CHEAP_POSTINGS:
            postings += known[taken][1]
            taken += 1
        while True:
            rows = db.rows(
                sql,
                (*score_params, tsquery(names[:taken]), *params, limit),
            )
            rest = sum(idf[taken:])
            if taken == len(known) or (len(rows) == limit and float(rows[-1][6]) >= rest):
                return [_hit(r) for r in rows]
            taken += 1

    def dense(
        self,
        vector: Any,
        *,
        dim: int,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
        limit: int,
        overfetch: int,
    ) -> list[Hit]:
        """The ``limit`` chunks nearest ``vector`` (cosine) among those the caller may see.
        pgvector's HNSW index gives the nearest ``limit × 1.25`` first (``hnsw.ef_search`` as
        large, so that many come back); when the permissions and filters leave fewer than
        ``limit`` of a full scan, it is asked again for ``limit × overfetch`` (at most 1,000,
        pgvector's bound)."""
        db = self.db
        typed = f"vector({int(dim)})"
        where, params = self._filters(who, since, exclude)
        full = min(_EF_MAX, max(limit * overfetch, 40))
        rows: list[tuple[Any, ...]] = []
        for k in dict.fromkeys((min(full, max(40, limit + limit // 4)), full)):
            db.execute("SELECT set_config('hnsw.ef_search', ?, true)", (str(k),))
            rows = db.rows(
                "SELECT c.id, c.seq, c.session, c.text, c.time, c.salience, c.score, c.scanned "
                "FROM (SELECT n.*, count(*) OVER () AS scanned FROM ("
                "SELECT id, seq, session, text, time, salience, acl, "
                f"1 - (embedding::{typed} <=> ?b::{typed}) AS score FROM {self.chunks} "
                f"WHERE embedding IS NOT NULL ORDER BY embedding::{typed} <=> ?b::{typed} "
                f"LIMIT ?) n) c WHERE {where} ORDER BY c.score DESC, c.seq LIMIT ?",
                (vector, vector, k, *params, limit),
            )
            if len(rows) >= limit or (rows and int(rows[0][7]) < k):
                break  # enough, or the index holds no more
        return [_hit(r) for r in rows]

    def around(
        self,
        seqs: Sequence[int],
        reach: int,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> dict[int, list[Hit]]:
        """For each of ``seqs``, the ``reach`` chunks before it and after it in the store's
        order, nearest first per side, each marked whether the caller may see it."""
        if not seqs or reach <= 0:
            return {}
        where, params = self._filters(who, since, exclude)
        cols = f"c.id, c.seq, c.session, c.text, c.time, c.salience, 0.0::float8, {where}"
        rows = self.db.rows(
            f"SELECT h.seq, n.* FROM unnest(?::bigint[]) AS h(seq) CROSS JOIN LATERAL ("
            f"(SELECT {cols} FROM {self.chunks} c WHERE c.seq < h.seq "
            "ORDER BY c.seq DESC LIMIT ?) UNION ALL "
            f"(SELECT {cols} FROM {self.chunks} c WHERE c.seq > h.seq "
            "ORDER BY c.seq LIMIT ?)) n",
            (list(seqs), *params, reach, *params, reach),
        )
        out: dict[int, list[Hit]] = {}
        for r in rows:
            out.setdefault(int(r[0]), []).append(_hit(r[1:8], visible=bool(r[8])))
        return out


def _hit(r: Sequence[Any], *, visible: bool = True) -> Hit:
    from datetime import UTC

    when = r[4]
    return Hit(
        id=str(r[0]),
        seq=int(r[1]),
        session=str(r[2]),
        text=str(r[3]),
        time=None if when is None else when.astimezone(UTC),
        salience=float(r[5]),
        score=float(r[6]),
        visible=visible,
    )

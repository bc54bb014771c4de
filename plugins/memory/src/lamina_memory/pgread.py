"""The searches of store-side retrieval on PostgreSQL (``pgsearch.ChunkSearch`` adds the schema
and the writes): BM25 over the full-text columns, pgvector's HNSW index, the chunks around the
hits, each with the caller's permissions and the request's filters in the SQL. Each runs inside
the caller's read transaction."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from attrs import frozen

from lamina_memory.db import Database
from lamina_memory.pglists import QueryTerm, ints
from lamina_memory.pgpostings import K1, B, Postings
from lamina_memory.pgseen import Scratch
from lamina_memory.pgtopk import TopK

#: The most neighbours pgvector's HNSW scan may return (``hnsw.ef_search`` at most 1,000).
_EF_MAX = 1_000
#: The neighbours of a query's hits: the hits' seqs, the neighbours' and their distances, each
#: place of the three lists one (hit, neighbour, distance).
Near = tuple[list[int], list[int], list[int]]


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


class ChunkReads:
    """The searches over one store's chunk table (``chunks``), term table (``terms``) and
    meta table (``meta``)."""

    db: Database
    chunks: str
    terms: str
    meta: str
    postings: Postings
    #: The arrays the BM25 searches reuse (``pgseen.Scratch``).
    scratch: Scratch

    def _metas(self, *keys: str) -> dict[str, str]:
        """The meta table's values of those ``keys`` it holds, in one statement."""
        rows = self.db.rows(f"SELECT key, value FROM {self.meta} WHERE key = ANY(?)", (list(keys),))
        return {str(k): str(v) for k, v in rows}

    def _meta(self, key: str) -> str | None:
        return self._metas(key).get(key)

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

    def _terms(self, unique: list[str]) -> tuple[list[QueryTerm], float, float | None]:
        """The query terms the store knows, rarest first, each with its idf and the most it
        can add to a chunk's score (idf × its largest term-frequency part, from the highest
        frequency and the shortest chunk it was ever written with: both only ever widen, so
        the bound holds); with the chunks' average length and the postings' reference one
        (None: no postings yet), read in the same statement (the meta table's rows once)."""
        packed, meta = self.postings.packed.table, self.meta
        rows = self.db.rows(
            f"SELECT t.term, t.df, t.max_tf, t.min_len, ARRAY(SELECT k.run FROM {packed} k "
            f"WHERE k.term = t.term AND k.blk = 0 ORDER BY k.run), m.docs, m.length, m.ref "
            f"FROM {self.terms} t CROSS JOIN (SELECT "
            f"(SELECT value FROM {meta} WHERE key = 'bm25_docs') AS docs, "
            f"(SELECT value FROM {meta} WHERE key = 'bm25_length') AS length, "
            f"(SELECT value FROM {meta} WHERE key = 'postings_avgdl') AS ref) m "
            "WHERE t.term = ANY(?)",
            (unique,),
        )
        if not rows:
            return [], 1.0, None
        docs, length, ref = rows[0][5:]
        n = max(int(docs or 0), 1)
        total = int(length or 0)
        avgdl = total / n if total else 1.0
        out = []
        for t, d, most, shortest, runs, *_totals in rows:
            idf = math.log(1 + (n - int(d) + 0.5) / (int(d) + 0.5))
            part = 1.0  # the term-frequency part is below 1
            if most is not None and shortest is not None:
                part = most / (most + K1 * (1 - B + B * shortest / avgdl))
            out.append(
                QueryTerm.make(
                    name=str(t),
                    df=int(d),
                    idf=idf,
                    bound=idf * part,
                    most=None if most is None else int(most),
                    runs=[int(r) for r in runs or []],
                )
            )
        known = sorted(out, key=lambda t: (t.df, t.name))
        return known, avgdl, None if ref is None else float(ref)

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
        among those the caller may see, best first, ties by the chunks' order: exact, from
        the impact-ordered postings read best first (``pgtopk``), so a query scores the few
        chunks that can reach the top, not every chunk holding one of its terms."""
        unique = list(dict.fromkeys(terms))
        if not unique or limit <= 0:
            return []
        known, avgdl, ref = self._terms(unique)
        if not known or ref is None:
            return []
        # BM25 of each term: idf × tf / (tf + k1 × (1 - b + b × nterms / avgdl)), the term's
        # frequency read from the arrays once (0 where the chunk lacks it; OFFSET 0 keeps the
        # planner from copying each lookup into the sum twice).
        tfs = ", ".join(
            f"COALESCE(c.tfs[array_position(c.terms, ?::text)], 0) AS f{i}"
            for i in range(len(known))
        )
        parts = [
            f"?::float8 * f.f{i} / (f.f{i} + (?::float8 + ?::float8 * c.nterms))"
            for i in range(len(known))
        ]
        score_params: list[Any] = [t.name for t in known]
        for term in known:
            score_params += [term.idf, K1 * (1 - B), K1 * B / avgdl]
        score = (
            f"CROSS JOIN LATERAL (SELECT {tfs} OFFSET 0) f "
            f"CROSS JOIN LATERAL (SELECT {' + '.join(parts)} AS score) s"
        )
        where, params = self._filters(who, since, exclude)
        search = TopK(
            db=self.db,
            postings=self.postings.table,
            packed=self.postings.packed.table,
            stale_table=self.postings.packed.stale_table,
            chunks=self.chunks,
            terms=known,
            avgdl=avgdl,
            ref=ref,
            limit=limit,
            score=(score, score_params),
            where=(where, params),
            scratch=self.scratch,
        )
        return [_hit(r) for r in search.run()]

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
        hits: Sequence[tuple[int, str]],
        reach: int,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> Near:
        """Each hit's (its seq and session) neighbours that count: of the ``reach`` chunks
        before it and the ``reach`` after it in the store's order (the d-th on a side at
        distance d, whether it counts or not), those of the hit's session the caller may see.
        As three lists, (hit, neighbour, distance) at each place: hit by hit, by distance,
        before first. One statement for all the hits, which returns the three as arrays
        (``at`` reads the rows of those kept): no Python object per neighbour."""
        if not hits or reach <= 0:
            return [], [], []
        where, params = self._filters(who, since, exclude)
        counts = f"c.session = h.session AND {where}"

        def side(number: int, op: str, way: str) -> str:  # the nearest ``reach`` on one side
            return (
                f"(SELECT {number} AS side, row_number() OVER (ORDER BY c.seq {way}) AS d, "
                f"c.seq, c.counts FROM (SELECT c.seq, {counts} AS counts FROM {self.chunks} c "
                f"WHERE c.seq {op} h.seq ORDER BY c.seq {way} LIMIT ?) c)"
            )

        order = "ORDER BY n.k, n.d, n.side"
        found = self.db.read_one(
            f"SELECT array_agg(n.hit {order}), array_agg(n.seq {order}), "
            f"array_agg(n.d {order}) FROM (SELECT h.k, h.seq AS hit, x.* "
            "FROM unnest(?::bigint[], ?::text[]) WITH ORDINALITY AS h(seq, session, k) "
            f"CROSS JOIN LATERAL ({side(0, '<', 'DESC')} UNION ALL {side(1, '>', 'ASC')}) x) n "
            "WHERE n.counts",
            (ints(s for s, _ in hits), [x for _, x in hits], *params, reach, *params, reach),
            binary=True,
        )
        hit, seq, d = found or (None, None, None)
        return hit or [], seq or [], d or []

    def at(
        self,
        seqs: Sequence[int],
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> list[Hit]:
        """The chunks at ``seqs`` the caller may see, in one statement (in no order)."""
        if not seqs:
            return []
        where, params = self._filters(who, since, exclude)
        rows = self.db.read_rows(
            "SELECT c.id, c.seq, c.session, c.text, c.time, c.salience, 0.0::float8 "
            f"FROM {self.chunks} c WHERE c.seq = ANY(?::bigint[]) AND {where}",
            (ints(seqs), *params),
            binary=True,
        )
        return [_hit(r) for r in rows]


def quote_lexeme(term: str) -> str:
    """A lexeme as ``tsvector`` and ``tsquery`` literals quote it."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _hit(r: Sequence[Any], *, visible: bool = True) -> Hit:
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

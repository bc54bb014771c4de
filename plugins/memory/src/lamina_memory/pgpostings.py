"""The impact-ordered postings of store-side BM25 on PostgreSQL: one row per (term, chunk) in
``lamina_chunk_postings``, indexed by term and impact (highest first), which ``pgtopk`` reads
best-first so that a query scores the few chunks that can reach its top instead of every
chunk holding a query term. The table holds the latest postings only: once it holds enough,
they are packed into runs of blocks (``pgpacked``); a store whose postings are all in the
table (the previous layout) packs them when it opens.

A posting's ``impact`` is the term-frequency part of the chunk's BM25 for that term,
``tf / (tf + k1 × (1 - b + b × nterms / avgdl))``, computed with the average length the store
had when its postings were first written (``postings_avgdl`` in the meta table): the idf and
the average length move with every write, which would reorder the postings, so the order stays
and the search widens its bound instead (``impact_bound``). The posting also keeps ``tf`` and
``nterms``, so a part is exact at any average length without reading the chunk. Every write
keeps the postings (``unpost`` before the chunk rows change, ``post`` after); a store written
before they existed gets them when it opens, in batches (``progress`` counts the chunks), and
``reindex`` writes them again with the average length of that moment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lamina_memory.db import Database
from lamina_memory.pgpacked import Packed

#: BM25's constants, as the in-memory index (``index.py``) uses them.
K1, B = 1.5, 0.75
#: The postings' layout; another value in the meta table writes them again (but the previous
#: layout, the same postings all in the table, is packed as it is).
POSTINGS = "impact-2"
_UNPACKED = "impact-1"
#: Chunks whose postings are written per statement when a store gets them.
POST_BATCH = 20_000

Progress = Callable[[int, int], None]


def impact_bound(impact: float, ref: float, avgdl: float) -> float:
    """The most a posting stored with ``impact`` (at average length ``ref``) can be worth at
    average length ``avgdl``: the same as the impact when the corpus grew shorter, more when
    it grew longer (``(a + c' × n) / tf >= (c' / c) × (a + c × n) / tf`` for ``c' <= c``),
    with room for ``real``'s rounding."""
    p = min(1.0, impact * (1 + 1e-6) + 1e-12)
    r = min(1.0, ref / avgdl) if avgdl > 0 else 1.0
    return 1.0 / (1.0 + r * (1.0 / p - 1.0))


class Postings:
    """The postings table of one store (``prefix``: ``lamina_``)."""

    def __init__(self, db: Database, prefix: str) -> None:
        self.db = db
        self.table = f"{prefix}chunk_postings"
        self.index = f"{prefix}chunk_postings_impact"
        self.chunks = f"{prefix}chunks"
        self.meta = f"{prefix}meta"
        self.packed = Packed(db, prefix)

    def _meta(self, key: str) -> str | None:
        row = self.db.one(f"SELECT value FROM {self.meta} WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            f"INSERT INTO {self.meta} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def ref(self) -> float | None:
        """The average length the impacts were computed with (None before the first chunk)."""
        value = self._meta("postings_avgdl")
        return None if value is None else float(value)

    # -- schema ---------------------------------------------------------------------------

    def create(self) -> None:
        """The tables, if missing (the index comes with ``ensure`` or ``fill``)."""
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (term TEXT NOT NULL, "
            "impact REAL NOT NULL, seq BIGINT NOT NULL, tf INTEGER NOT NULL, "
            "nterms INTEGER NOT NULL)"
        )
        self.packed.create()

    def create_index(self) -> None:
        """The index a query reads each term's postings by, best first, without the table."""
        self.db.execute(
            f"CREATE INDEX IF NOT EXISTS {self.index} ON {self.table} "
            "(term, impact DESC, seq) INCLUDE (tf, nterms)"
        )

    def ensure(self, progress: Progress | None = None) -> None:
        """Give the store its postings if it lacks them (or has another layout)."""
        self.create()
        layout = self._meta("postings")
        if layout == _UNPACKED:  # the same postings, in the table: packed as they are
            found = self.db.one(f"SELECT count(*) FROM {self.table}")
            total = int(found[0]) if found else 0
            if progress is not None:
                progress(0, total)
            self.packed.pack(truncate=True)
            self._set_meta("postings", POSTINGS)
            if progress is not None:
                progress(total, total)
        elif layout != POSTINGS:
            self.fill(progress)
        self.create_index()

    def fill(self, progress: Progress | None = None) -> int:
        """Write every chunk's postings again, in batches of ``POST_BATCH`` chunks in the
        store's order, with the index dropped meanwhile and built after; returns how many
        chunks."""
        db = self.db
        found = db.one(f"SELECT count(*), COALESCE(MAX(seq), 0) FROM {self.chunks}")
        total, top = (int(found[0]), int(found[1])) if found else (0, 0)
        docs, length = self._meta("bm25_docs"), self._meta("bm25_length")
        self.restart(int(length or 0) / int(docs) if docs and int(docs) > 0 else None)
        done, last = 0, 0
        if progress is not None:
            progress(0, total)
        while last < top:
            row = db.one(
                f"SELECT count(*), MAX(seq) FROM (SELECT seq FROM {self.chunks} WHERE seq > ? "
                "ORDER BY seq LIMIT ?) s",
                (last, POST_BATCH),
            )
            if not row or not row[0]:
                break
            n, upto = int(row[0]), int(row[1])
            self.add_range(last, upto)
            done, last = done + n, upto
            if progress is not None:
                progress(done, total)
        self.finish()
        db.execute(f"ANALYZE {self.table}")  # the planner's counts, before autovacuum's
        return total

    def restart(self, avgdl: float | None) -> None:
        """Empty the postings (their index dropped until ``finish``) and take ``avgdl`` as the
        reference average length (None: the next write's)."""
        self.db.execute(f"DROP INDEX IF EXISTS {self.index}")
        self.db.execute(f"TRUNCATE {self.table}")
        self.packed.clear()
        if avgdl is None:
            self.db.execute(f"DELETE FROM {self.meta} WHERE key = 'postings_avgdl'")
        else:
            self.set_ref(avgdl)

    def set_ref(self, avgdl: float) -> None:
        """Take ``avgdl`` as the reference average length (before any posting is written)."""
        self._set_meta("postings_avgdl", repr(max(avgdl, 1.0)))

    def add_range(self, after: int, upto: int) -> None:
        """Add the postings of the chunks with ``after < seq <= upto`` (after ``restart``)."""
        ref = self.ref()
        if ref is not None:
            self._insert("c.seq > ? AND c.seq <= ?", (after, upto), ref)

    def finish(self) -> None:
        """Mark the postings complete, pack them into one run and build the (then empty)
        table's index."""
        self._set_meta("postings", POSTINGS)
        self.packed.pack(truncate=True)
        self.create_index()

    # -- writes ---------------------------------------------------------------------------

    def _impact(self) -> str:
        """The SQL of a posting's impact over ``u.tf`` and ``c.nterms`` (one ``?``: the
        reference average length); the same expression writes and finds a posting."""
        return (
            f"(u.tf::float8 / (u.tf + {K1 * (1 - B)!r}::float8 + "
            f"{K1 * B!r}::float8 * c.nterms / ?::float8))::real"
        )

    def _insert(self, where: str, params: Sequence[object], ref: float) -> None:
        self.db.execute(
            f"INSERT INTO {self.table} (term, impact, seq, tf, nterms) "
            f"SELECT u.term, {self._impact()}, c.seq, u.tf, c.nterms FROM {self.chunks} c "
            f"CROSS JOIN LATERAL unnest(c.terms, c.tfs) AS u(term, tf) WHERE {where}",
            (ref, *params),
        )

    def unpost(self, ids: list[str]) -> None:
        """Remove the postings of the chunks ``ids`` as they are now (before a write replaces
        them), each found through the index by its term, impact and place."""
        ref = self.ref()
        if ref is None or not ids:
            return
        self.packed.stale(ids)
        self.db.execute(
            f"DELETE FROM {self.table} p USING (SELECT u.term, {self._impact()} AS impact, "
            f"c.seq FROM {self.chunks} c CROSS JOIN LATERAL unnest(c.terms, c.tfs) AS "
            "u(term, tf) WHERE c.id = ANY(?::text[])) o "
            "WHERE p.term = o.term AND p.impact = o.impact AND p.seq = o.seq",
            (ref, ids),
        )

    def post(self, ids: list[str]) -> None:
        """Add the postings of the chunks ``ids`` as just written. The store's first chunks
        fix the reference average length."""
        if not ids:
            return
        ref = self.ref()
        if ref is None:
            docs, length = self._meta("bm25_docs"), self._meta("bm25_length")
            n = int(docs or 0)
            self.set_ref(int(length or 0) / n if n else 1.0)
            ref = self.ref() or 1.0
        self._insert("c.id = ANY(?::text[])", (ids,), ref)
        if self.packed.due():
            self.packed.pack()

"""Chunk retrieval inside PostgreSQL: BM25 from impact-ordered postings read best first
(``pgpostings``, ``pgtopk``), pgvector's HNSW index for the dense neighbours, the caller's
permissions and filters in the SQL, so no process holds every chunk.

Each chunk's ``lexemes`` are the terms of Lamina's own analyser (``signals.analyse``: the stop
words and Snowball stems the in-memory BM25 uses), written as a ``tsvector`` whose positions
1..tf count each term, with a GIN index (full-text matching in SQL); ``terms`` and ``tfs`` hold
the same distinct terms and their frequencies as arrays, which a chunk's exact score is
computed from (``array_position``); ``nterms`` is the text's length in terms; the postings
table holds one row per term of each chunk. ``lamina_chunk_terms`` keeps each term's
document frequency and the meta table the corpus size and total length, updated by every write,
so a query computes BM25 exactly as ``bm25s``'s Lucene variant does in memory (same idf, same
term-frequency part). A store written before these columns existed gets them when it opens: the
texts are analysed again and their postings written in batches (``progress`` counts them),
then the indexes are built; a store with the columns but no postings gets the postings alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from attrs import frozen

from lamina_memory.db import Database
from lamina_memory.pgpostings import Postings
from lamina_memory.pgread import ChunkReads, quote_lexeme
from lamina_memory.pgseen import Scratch
from lamina_memory.signals import analyse

#: The analyser the stored lexemes were made with; another value re-analyses every text.
ANALYSER = "snowball-english-2"
#: PostgreSQL's limits: positions per lexeme, bytes per lexeme, bytes per tsvector.
_MAX_TF, _MAX_LEXEME, _MAX_VECTOR = 256, 2046, 1_000_000
#: Rows above this many bytes move their vector out of line (``toast_tuple_target``).
_ROW_TARGET = 1024
#: Texts analysed per batch when a store is migrated or re-indexed.
MIGRATE_BATCH = 5_000

Progress = Callable[[int, int], None]


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
        part = f"{quote_lexeme(term)}:{','.join(str(i) for i in range(1, min(n, _MAX_TF) + 1))}"
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


class ChunkSearch(ChunkReads):
    """The SQL of store-side retrieval for one store's tables (``prefix``: ``lamina_``): its
    schema, migration and term counts here, its searches in ``ChunkReads``."""

    def __init__(self, db: Database, prefix: str) -> None:
        self.db = db
        self.chunks = f"{prefix}chunks"
        self.terms = f"{prefix}chunk_terms"
        self.meta = f"{prefix}meta"
        self.prefix = prefix
        self.postings = Postings(db, prefix)
        self.scratch = Scratch()

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
        db.execute(
            f"ALTER TABLE {self.terms} ADD COLUMN IF NOT EXISTS max_tf INTEGER, "
            "ADD COLUMN IF NOT EXISTS min_len INTEGER"
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
        self.postings.create()
        if self._meta("analyser") != ANALYSER:
            self.reanalyse(progress)
        db.execute(
            f"CREATE INDEX IF NOT EXISTS {p}chunks_lexemes_gin ON {self.chunks} USING gin (lexemes)"
        )
        self.postings.ensure(progress)

    def reanalyse(self, progress: Progress | None = None) -> int:
        """Analyse every chunk's text again and write its postings, in batches of
        ``MIGRATE_BATCH`` (never all of them in memory), then count the terms again; returns
        how many chunks. The postings' reference length is the old average, or the first
        batch's."""
        db = self.db
        found = db.one(f"SELECT count(*) FROM {self.chunks}")
        total = int(found[0]) if found else 0
        done, last = 0, -1
        docs, words = int(self._meta("bm25_docs") or 0), int(self._meta("bm25_length") or 0)
        self.postings.restart(words / docs if docs and words else None)
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
            if self.postings.ref() is None:
                self.postings.set_ref(sum(a.length for a, _ in done_rows) / len(done_rows))
            self.postings.add_range(last, int(rows[-1][0]))
            last = int(rows[-1][0])
            done += len(rows)
            if progress is not None:
                progress(done, total)
        db.execute(f"DELETE FROM {self.terms}")
        db.execute(
            f"INSERT INTO {self.terms} (term, df, max_tf, min_len) "
            "SELECT u.term, count(*), max(u.tf), min(c.nterms) "
            f"FROM {self.chunks} c, unnest(c.terms, c.tfs) AS u(term, tf) GROUP BY u.term"
        )
        length = db.one(f"SELECT COALESCE(SUM(nterms), 0) FROM {self.chunks}")
        self._set_meta("bm25_docs", str(total))
        self._set_meta("bm25_length", str(int(length[0]) if length else 0))
        self._set_meta("analyser", ANALYSER)
        self.postings.finish()
        return total

    def _set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            f"INSERT INTO {self.meta} (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    # -- writes ---------------------------------------------------------------------------

    def count_terms(self, written: dict[str, Analysed]) -> list[str]:
        """Move the term counts and corpus totals by a write of ``written`` (chunk id → its new
        analysed text), read before the rows change: a replaced chunk's old terms leave.
        Returns the ids of the chunks replaced."""
        db = self.db
        df: Counter[str] = Counter()
        most: dict[str, int] = {}
        shortest: dict[str, int] = {}
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
            for term, tf in zip(new.terms, new.tfs, strict=True):
                most[term] = max(most.get(term, 0), tf)
                shortest[term] = min(shortest.get(term, new.length), new.length)
        moved = [t for t, d in df.items() if d or t in most]
        if moved:
            # A term's highest frequency and shortest chunk only ever widen: a bound on what
            # it can add to a score (pgread), never tightened by a replacement.
            db.execute(
                f"INSERT INTO {self.terms} (term, df, max_tf, min_len) "
                "SELECT * FROM unnest(?::text[], ?::int[], ?::int[], ?::int[]) "
                f"ON CONFLICT (term) DO UPDATE SET df = {self.terms}.df + excluded.df, "
                f"max_tf = GREATEST({self.terms}.max_tf, excluded.max_tf), "
                f"min_len = LEAST({self.terms}.min_len, excluded.min_len)",
                (
                    moved,
                    [df[t] for t in moved],
                    [most.get(t) for t in moved],
                    [shortest.get(t) for t in moved],
                ),
            )
            if any(df[t] < 0 for t in moved):
                db.execute(f"DELETE FROM {self.terms} WHERE df <= 0")
        self._set_meta("bm25_docs", str(int(self._meta("bm25_docs") or 0) + docs))
        self._set_meta("bm25_length", str(int(self._meta("bm25_length") or 0) + length))
        return list(old)

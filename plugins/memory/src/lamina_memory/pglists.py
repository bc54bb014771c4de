"""The impact-ordered lists a PostgreSQL BM25 search (``pgtopk``) reads of each query term: the
postings table's (``pgpostings``, a slice of rows at a time) and each packed run's
(``pgpacked``, a few blocks at a time), all of one round in two statements."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from attrs import define, field

from lamina_memory.db import Database
from lamina_memory.pgpacked import BLOCK
from lamina_memory.pgpostings import impact_bound

#: Postings of each term read from the postings table in its first slice (at least; the
#: request's limit if more).
FIRST = 64


@define(kw_only=True)
class Cursor:
    """How far one list of a term was read: the postings table's (``run`` None: ``depth``
    postings, the last ``last``) or a packed run's (``depth`` blocks); ``bound``: the most
    one of its unread postings can add to a score."""

    run: int | None
    bound: float
    done: bool = False
    depth: int = 0
    last: tuple[float, int] = (math.inf, -1)

    def step(self, limit: int) -> int:
        """Postings (table: as many again as read) or blocks (run: seven times as many as
        read, since reading them costs less than a round) the next read takes."""
        if self.run is None:
            return max(FIRST, limit, self.depth)
        return max(1, 7 * self.depth)

    def cost(self, limit: int) -> int:
        """What the next read costs, in postings read from the table (a packed posting costs
        about a sixteenth of one)."""
        return self.step(limit) if self.run is None else self.step(limit) * BLOCK // 16


@define(kw_only=True)
class QueryTerm:
    """A query term: its name, idf, the bound of a posting not read yet before any is read
    (from the term table's largest frequency and shortest chunk), and its lists."""

    name: str
    df: int
    idf: float
    #: The highest frequency the term was ever written with (None: unknown).
    most: int | None = None
    lists: list[Cursor] = field(factory=list)

    @classmethod
    def make(
        cls, *, name: str, df: int, idf: float, bound: float, most: int | None, runs: list[int]
    ) -> QueryTerm:
        lists = [Cursor(run=None, bound=bound)] + [Cursor(run=r, bound=bound) for r in runs]
        return cls(name=name, df=df, idf=idf, most=most, lists=lists)

    @property
    def bound(self) -> float:
        """The most the term's unread postings can add to a chunk not seen under it (a chunk
        has one posting of the term at most, in one of its lists)."""
        return max((c.bound for c in self.lists if not c.done), default=0.0)

    @property
    def done(self) -> bool:
        return all(c.done for c in self.lists)

    def cost(self, limit: int) -> int:
        return sum(c.cost(limit) for c in self.lists if not c.done)


def ints(values: Iterable[int]) -> str:
    """Integers as one array literal (``'{1,2,3}'``, cast by the statement): a list of them,
    sent as an array parameter, costs about a microsecond of the client's time per value."""
    return "{" + ",".join(str(int(v)) for v in values) + "}"


#: One list's postings read: the term's index, then the chunks' seqs, the frequencies and the
#: chunks' lengths (numpy arrays).
Read = tuple[int, Any, Any, Any]


def read_lists(
    db: Database,
    *,
    postings: str,
    packed: str,
    terms: list[QueryTerm],
    grow: list[int],
    limit: int,
    stale: tuple[Any, Any],
    ref: float,
    avgdl: float,
) -> list[Read]:
    """The next postings of each open list of the terms ``grow`` (moving their cursors and
    bounds), the packed ones without the stale seqs' dead postings."""
    out: list[Read] = []
    table = [(i, c) for i in grow for c in terms[i].lists if c.run is None and not c.done]
    runs = [(i, c) for i in grow for c in terms[i].lists if c.run is not None and not c.done]
    if table:
        out += _table(db, postings, terms, table, limit, ref, avgdl)
    if runs:
        out += _runs(db, packed, terms, runs, stale, ref, avgdl)
    return out


def _table(
    db: Database,
    postings: str,
    terms: list[QueryTerm],
    lists: list[tuple[int, Cursor]],
    limit: int,
    ref: float,
    avgdl: float,
) -> list[Read]:
    """The next slice of the postings table's list of each term, one row per term with each
    column as big-endian binary values end to end (no Python object per posting)."""
    import numpy as np

    take = [c.step(limit) for _, c in lists]
    rows = db.rows(
        "SELECT q.i, p.* FROM unnest(?::text[], ?::real[], ?::bigint[], ?::int[], "
        "?::int[]) AS q(term, impact, seq, take, i) CROSS JOIN LATERAL (SELECT "
        "string_agg(int8send(seq), ''), string_agg(int4send(tf), ''), "
        "string_agg(int4send(nterms), ''), string_agg(float4send(impact), '') FROM ("
        f"SELECT seq, tf, nterms, impact FROM {postings} "
        "WHERE term = q.term AND impact <= q.impact AND (impact < q.impact OR seq > q.seq) "
        "ORDER BY impact DESC, seq LIMIT q.take) x) p",
        (
            [terms[i].name for i, _ in lists],
            [c.last[0] for _, c in lists],
            [c.last[1] for _, c in lists],
            take,
            list(range(len(lists))),
        ),
        binary=True,
    )
    found = {int(r[0]): r[1:] for r in rows if r[1] is not None}
    out: list[Read] = []
    for k, ((i, c), want) in enumerate(zip(lists, take, strict=True)):
        seqs_, tfs_, lengths_, impacts_ = found.get(k, (b"", b"", b"", b""))
        got = len(seqs_) // 8
        c.depth += got
        if got:
            seqs = np.frombuffer(seqs_, dtype=">i8").astype(np.int64)
            impacts = np.frombuffer(impacts_, dtype=">f4").astype(np.float64)
            tf = np.frombuffer(tfs_, dtype=">i4").astype(np.float64)
            out.append((i, seqs, tf, np.frombuffer(lengths_, dtype=">i4").astype(np.float64)))
        if got < want:
            c.done, c.bound = True, 0.0
            continue
        low = float(impacts.min())  # the last read: lowest impact, then latest seq
        c.last = (low, int(seqs[impacts == low].max()))
        c.bound = terms[i].idf * impact_bound(low, ref, avgdl)
    return out


def _runs(
    db: Database,
    packed: str,
    terms: list[QueryTerm],
    lists: list[tuple[int, Cursor]],
    stale: tuple[Any, Any],
    ref: float,
    avgdl: float,
) -> list[Read]:
    """The next blocks of each packed run listed."""
    import numpy as np

    rows = db.rows(
        "SELECT q.k, k.run, k.blk, k.low, k.more, k.seqs, k.tfs, k.lens FROM unnest(?::text[], ?::int[], ?::int[], ?::int[], ?::int[]) "
        f"AS q(term, run, lo, hi, k) JOIN {packed} k ON k.term = q.term AND k.run = q.run "
        "AND k.blk >= q.lo AND k.blk < q.hi",
        (
            [terms[i].name for i, _ in lists],
            [c.run for _, c in lists],
            [c.depth for _, c in lists],
            [c.depth + c.step(0) for _, c in lists],
            list(range(len(lists))),
        ),
        binary=True,
    )
    stale_seqs, stale_runs = stale
    got: dict[int, list[tuple[Any, ...]]] = {}
    for r in rows:
        got.setdefault(int(r[0]), []).append(r)
    out: list[Read] = []
    for k, (i, c) in enumerate(lists):
        blocks = sorted(got.get(k, []), key=lambda r: int(r[2]))
        c.depth += len(blocks)
        if not blocks or not blocks[-1][4]:
            c.done, c.bound = True, 0.0
        else:
            c.bound = terms[i].idf * impact_bound(float(blocks[-1][3]), ref, avgdl)
        if not blocks:
            continue
        seqs = np.frombuffer(b"".join(b[5] for b in blocks), dtype=">i8").astype(np.int64)
        tf = np.frombuffer(b"".join(b[6] for b in blocks), dtype=">i4").astype(np.float64)
        lengths = np.frombuffer(b"".join(b[7] for b in blocks), dtype=">i4").astype(np.float64)
        if len(stale_seqs):
            at = np.minimum(np.searchsorted(stale_seqs, seqs), len(stale_seqs) - 1)
            live = ~((stale_seqs[at] == seqs) & (stale_runs[at] > c.run))
            seqs, tf, lengths = seqs[live], tf[live], lengths[live]
        out.append((i, seqs, tf, lengths))
    return out


def stale_seqs(db: Database, table: str) -> tuple[Any, Any]:
    """The stale seqs (sorted) and the run below which each one's packed postings are dead."""
    import numpy as np

    row = db.one(f"SELECT array_agg(seq ORDER BY seq), array_agg(run ORDER BY seq) FROM {table}")
    if not row or row[0] is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.array(row[0], dtype=np.int64), np.array(row[1], dtype=np.int64)

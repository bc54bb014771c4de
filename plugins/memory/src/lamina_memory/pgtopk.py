"""Exact BM25 top-k on PostgreSQL, best first, from the impact-ordered postings (``pgpostings``).

Each query term's postings are read highest impact first, a slice at a time (one statement
for all the terms, the postings index alone, no chunk row). What was read gives every chunk
seen a lower bound (the exact parts of the terms it was seen under) and an upper bound (plus,
for each term it was not seen under, the most that term's unread postings can be worth: the
term's idf times the bound of the last impact read, or, if lower, the part of the term's
highest frequency in a chunk of that length); a chunk never seen can reach at most the sum of
the terms' bounds. The lists go deeper until that sum falls below the ``limit``-th best lower
bound (and further while the next slices cost less than scoring the chunks whose upper bound
still reaches it: a posting read costs about an eighth of a chunk scored); then the chunks
whose upper bound reaches the ``limit``-th best exact score are scored exactly, on their rows,
with the caller's permissions and filters (so the threshold is always among chunks the caller
may see), and the search ends once no unseen chunk can reach that score, or every posting of
every term was read. The result is the exact top: the same chunks, order and scores as
scoring every chunk holding a query term.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from attrs import define, field

from lamina_memory.db import Database
from lamina_memory.pgpostings import K1, B, impact_bound

#: Postings of each term in its first slice (at least; the request's limit if more).
FIRST = 64
#: Chunks scored exactly per statement.
CHECK_BATCH = 1024
#: What scoring a chunk on its row costs, in postings read (measured: about 8 µs against 1).
SCORE_COST = 8
#: Room for floating-point rounding when bounds and scores are compared.
_EPS = 1e-9


@define(kw_only=True)
class QueryTerm:
    """A query term: its name, idf, and the bound of a posting not read yet (from the term
    table's largest frequency and shortest chunk before the first slice)."""

    name: str
    df: int
    idf: float
    bound: float
    #: The highest frequency the term was ever written with (None: unknown).
    most: int | None = None
    depth: int = 0
    done: bool = False
    last: tuple[float, int] = (math.inf, -1)


@define(kw_only=True)
class TopK:
    """One search: the terms, the postings read so far (numpy arrays: the chunk, the term and
    the exact part of each), the best chunks checked."""

    db: Database
    postings: str
    chunks: str
    terms: list[QueryTerm]
    avgdl: float
    ref: float
    limit: int
    #: The joins that give each chunk ``c`` its exact score ``s.score``, and their parameters;
    #: the filters' SQL over ``c`` and their parameters.
    score: tuple[str, list[Any]]
    where: tuple[str, list[Any]]
    seqs: list[Any] = field(factory=list)
    which: list[Any] = field(factory=list)
    parts: list[Any] = field(factory=list)
    lengths: list[Any] = field(factory=list)
    checked: set[int] = field(factory=set)
    #: The best chunks checked so far: (exact score, seq), best first.
    best: list[tuple[float, int]] = field(factory=list)
    #: Postings read and chunks scored (what a test counts).
    read: int = 0
    scored: int = 0

    def run(self) -> list[tuple[Any, ...]]:
        grow = list(range(len(self.terms)))
        while True:
            self._read(grow)
            seen = self._seen()
            outside = sum(t.bound for t in self.terms)
            finished = all(t.done for t in self.terms)
            estimate = self._estimate(seen[1])
            if not finished and outside + _EPS >= estimate:
                grow = self._deeper()  # no chunk is sure to beat the unseen ones yet
                continue
            if not finished and self._cheaper_to_read(seen[2], estimate):
                grow = self._deeper()
                continue
            self._check(seen[0], seen[2])
            if finished or (len(self.best) >= self.limit and self._theta() > outside + _EPS):
                return self.rows()
            grow = self._deeper()

    # -- the postings -----------------------------------------------------------------------

    def _read(self, grow: list[int]) -> None:
        """The next slice of each of the terms ``grow`` (as deep again as read so far), one
        row of arrays per term."""
        import numpy as np

        take = [max(FIRST, self.limit, self.terms[i].depth) for i in grow]
        rows = self.db.rows(
            "SELECT q.i, p.* FROM unnest(?::text[], ?::real[], ?::bigint[], ?::int[], "
            "?::int[]) AS q(term, impact, seq, take, i) CROSS JOIN LATERAL (SELECT "
            "array_agg(seq), array_agg(tf), array_agg(nterms), array_agg(impact) FROM ("
            f"SELECT seq, tf, nterms, impact FROM {self.postings} "
            "WHERE term = q.term AND impact <= q.impact AND (impact < q.impact OR seq > q.seq) "
            "ORDER BY impact DESC, seq LIMIT q.take) x) p",
            (
                [self.terms[i].name for i in grow],
                [self.terms[i].last[0] for i in grow],
                [self.terms[i].last[1] for i in grow],
                take,
                grow,
            ),
            binary=True,
        )
        found = {int(r[0]): r[1:] for r in rows if r[1] is not None}
        a, c = K1 * (1 - B), K1 * B / self.avgdl
        for i, want in zip(grow, take, strict=True):
            term = self.terms[i]
            seqs_, tfs_, lengths_, impacts_ = found.get(i, ([], [], [], []))
            got = len(seqs_)
            self.read += got
            term.depth += got
            if got:
                seqs = np.array(seqs_, dtype=np.int64)
                tf = np.array(tfs_, dtype=np.float64)
                impacts = np.array(impacts_, dtype=np.float64)
                self.seqs.append(seqs)
                self.which.append(np.full(got, i, dtype=np.int64))
                length = np.array(lengths_, dtype=np.float64)
                self.lengths.append(length)
                self.parts.append(term.idf * tf / (tf + (a + c * length)))
            if got < want:
                term.done, term.bound = True, 0.0
                continue
            low = float(impacts.min())  # the last read: lowest impact, then latest seq
            term.last = (low, int(seqs[impacts == low].max()))
            term.bound = term.idf * impact_bound(low, self.ref, self.avgdl)

    def _seen(self) -> tuple[Any, Any, Any]:
        """Each chunk seen, the sum of its parts read, and its upper bound: those plus, for
        each term it was not seen under, the most that term's unread postings can add to a
        chunk of its length (the term's last impact read, or its highest frequency in a chunk
        of that length, whichever is lower)."""
        import numpy as np

        seqs, which = np.concatenate(self.seqs), np.concatenate(self.which)
        parts, lengths = np.concatenate(self.parts), np.concatenate(self.lengths)
        self.seqs, self.which, self.parts, self.lengths = [seqs], [which], [parts], [lengths]
        unique, inverse = np.unique(seqs, return_inverse=True)
        known = np.bincount(inverse, weights=parts, minlength=len(unique))
        length = np.zeros(len(unique))
        length[inverse] = lengths
        a, c = K1 * (1 - B), K1 * B / self.avgdl
        ups = known.copy()
        for i, t in enumerate(self.terms):
            if t.bound <= 0:
                continue
            cap: Any = t.bound
            if t.most is not None:
                cap = np.minimum(t.bound, t.idf * t.most / (t.most + (a + c * length)))
            unseen = np.ones(len(unique), dtype=bool)
            unseen[inverse[which == i]] = False
            ups += np.where(unseen, cap, 0.0)
        return unique, known, ups

    def _deeper(self) -> list[int]:
        """The terms to read further: those whose unread postings could add the most (at
        least half the largest such bound)."""
        open_ = [i for i, t in enumerate(self.terms) if not t.done]
        most = max(self.terms[i].bound for i in open_)
        return [i for i in open_ if self.terms[i].bound >= most / 2]

    def _cheaper_to_read(self, ups: Any, at: float) -> bool:
        """Whether reading the next slices (which lowers the chunks' upper bounds) costs less
        than scoring the chunks whose upper bound reaches ``at`` now."""
        many = int((ups + _EPS >= at).sum()) - len(self.checked)
        if many <= 2 * self.limit + 8:
            return False
        step = sum(max(FIRST, self.limit, self.terms[i].depth) for i in self._deeper())
        return many * SCORE_COST > step

    def _estimate(self, known: Any) -> float:
        """The ``limit``-th best lower bound among the chunks seen (-inf below ``limit``)."""
        import numpy as np

        if len(known) < self.limit:
            return -math.inf
        kth = float(np.partition(known, len(known) - self.limit)[len(known) - self.limit])
        return max(self._theta(), kth)

    # -- the chunks ---------------------------------------------------------------------------

    def _theta(self) -> float:
        """The ``limit``-th best exact score among the chunks checked (-inf below ``limit``)."""
        return self.best[self.limit - 1][0] if len(self.best) >= self.limit else -math.inf

    def _check(self, unique: Any, ups: Any) -> None:
        """Score exactly every chunk seen whose upper bound (its parts read, plus the bounds
        of the terms it was not seen under) reaches the threshold, the most promising first
        (the threshold rises as they are scored)."""
        import numpy as np

        keep = ups + _EPS >= self._theta()
        if self.checked:
            keep &= ~np.isin(unique, np.fromiter(self.checked, dtype=np.int64))
        unique, ups = unique[keep], ups[keep]
        order = np.lexsort((unique, -ups))
        pending, ups = unique[order].tolist(), ups[order].tolist()
        at = 0
        while at < len(pending):
            theta = self._theta()
            # Below ``limit`` checked there is no threshold yet: a few more than are missing.
            size = CHECK_BATCH if theta > -math.inf else 2 * (self.limit - len(self.best)) + 8
            end = min(at + size, len(pending))
            while end > at and ups[end - 1] + _EPS < theta:
                end -= 1
            if end == at:
                return
            self._score(pending[at:end])
            at = end

    def _score(self, seqs: Sequence[int]) -> None:
        """The exact scores of the chunks ``seqs`` the caller may see."""
        score_sql, score_params = self.score
        where_sql, where_params = self.where
        rows = self.db.rows(
            f"SELECT c.seq, s.score FROM {self.chunks} c {score_sql} "
            f"WHERE c.seq = ANY(?::bigint[]) AND {where_sql}",
            (*score_params, list(seqs), *where_params),
        )
        self.checked.update(seqs)
        self.scored += len(seqs)
        found = [(float(score), int(seq)) for seq, score in rows]
        self.best = sorted([*self.best, *found], key=lambda r: (-r[0], r[1]))
        del self.best[self.limit :]

    def rows(self) -> list[tuple[Any, ...]]:
        """The best chunks' rows (id, seq, session, text, time, salience, score), best first."""
        if not self.best:
            return []
        found = {
            int(r[1]): r
            for r in self.db.rows(
                "SELECT id, seq, session, text, time, salience FROM "
                f"{self.chunks} WHERE seq = ANY(?::bigint[])",
                ([seq for _, seq in self.best],),
            )
        }
        return [(*found[seq][:6], score) for score, seq in self.best if seq in found]

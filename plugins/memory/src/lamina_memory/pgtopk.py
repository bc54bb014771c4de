"""Exact BM25 top-k on PostgreSQL, best first, from the impact-ordered postings (``pgpostings``,
packed in runs of blocks by ``pgpacked``, read by ``pglists``).

Each query term's lists (the postings table's, a slice at a time, and each packed run's, a
few blocks at a time) are read highest impact first, all the terms' next reads in two
statements. What was read gives every chunk seen a lower bound (the exact parts of the terms
it was seen under) and an upper bound (plus, for each term it was not seen under, the most
that term's unread postings can be worth: the term's idf times the bound of the lowest impact
read last in any of its open lists, or, if lower, the part of the term's highest frequency in
a chunk of that length); a chunk never seen can reach at most the sum of the terms' bounds.
The chunks with the ``limit`` best lower bounds are scored exactly early (their score is often
far above what was read of it), which gives a threshold: the ``limit``-th best exact score.
The lists go deeper until the sum of the bounds falls below it, reading only the terms whose
bounds the others' cannot make up for (MaxScore: the open terms by bound, lowest first, that
add up to less than the threshold are left), and further while the next reads cost less than
scoring the chunks whose upper bound still reaches it; then those chunks are scored exactly,
on their rows, with the caller's permissions and filters (so the threshold is always among
chunks the caller may see), best upper bound first, and the search ends once no unseen chunk
can reach the threshold, or every posting of every term was read. The result is the exact
top: the same chunks, order and scores as scoring every chunk holding a query term.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from attrs import define, field

from lamina_memory.db import Database
from lamina_memory.pglists import QueryTerm, ints, read_lists, stale_seqs
from lamina_memory.pgpostings import K1, B

#: Chunks scored exactly per statement.
CHECK_BATCH = 1024
#: What scoring a chunk on its row costs, in postings read from the table (about 5 µs against
#: 0.3 µs with the client's work on it; a packed posting costs a sixteenth of one).
SCORE_COST = 8
#: Terms per word of a chunk's flags (the terms it was seen under).
_BITS = 32
#: Room for floating-point rounding when bounds and scores are compared.
_EPS = 1e-9


@define(kw_only=True)
class TopK:
    """One search: the terms, the postings read so far (numpy arrays: the chunk, the term and
    the exact part of each), the best chunks checked."""

    db: Database
    postings: str
    packed: str
    stale_table: str
    chunks: str
    terms: list[QueryTerm]
    avgdl: float
    ref: float
    limit: int
    #: The joins that give each chunk ``c`` its exact score ``s.score``, and their parameters;
    #: the filters' SQL over ``c`` and their parameters.
    score: tuple[str, list[Any]]
    where: tuple[str, list[Any]]
    #: The postings read since the chunks seen were last brought up to date.
    fresh: list[tuple[int, Any, Any, Any]] = field(factory=list)
    #: The chunks seen (their seqs, as first seen) and, for each, the sum of the parts read,
    #: its length and the terms it was seen under (bits of ``under``: a word per 32 terms).
    unique: Any = None
    known: Any = None
    length: Any = None
    under: Any = None
    #: Each seq's place in ``unique`` plus one (0: not seen), grown as larger seqs are read:
    #: 4 bytes per seq up to the largest read, its pages untouched where none was.
    slot: Any = None
    checked: set[int] = field(factory=set)
    #: The best chunks checked so far: (exact score, seq), best first.
    best: list[tuple[float, int]] = field(factory=list)
    #: The stale seqs and the run below which each one's packed postings are dead.
    stale: tuple[Any, Any] = field(factory=lambda: ((), ()))
    #: Postings read and chunks scored (what a test counts).
    read: int = 0
    scored: int = 0

    def run(self) -> list[tuple[Any, ...]]:
        grow = list(range(len(self.terms)))
        if any(c.run is not None for t in self.terms for c in t.lists):
            self.stale = stale_seqs(self.db, self.stale_table)
        while True:
            self._read(grow)
            seen = self._seen()
            outside = sum(t.bound for t in self.terms)
            finished = all(t.done for t in self.terms)
            if not finished and outside + _EPS >= self._theta():
                self._probe(seen[0], seen[1])
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
        """The next postings of each list of the terms ``grow``, with each one's exact part."""

        a, c = K1 * (1 - B), K1 * B / self.avgdl
        for i, seqs, tf, length in read_lists(
            self.db,
            postings=self.postings,
            packed=self.packed,
            terms=self.terms,
            grow=grow,
            limit=self.limit,
            stale=self.stale,
            ref=self.ref,
            avgdl=self.avgdl,
        ):
            self.read += len(seqs)
            self.fresh.append((i, seqs, self.terms[i].idf * tf / (tf + (a + c * length)), length))

    def _seen(self) -> tuple[Any, Any, Any]:
        """Each chunk seen, the sum of its parts read, and its upper bound: those plus, for
        each term it was not seen under, the most that term's unread postings can add to a
        chunk of its length (the term's last impact read, or its highest frequency in a chunk
        of that length, whichever is lower). The postings read since the last call are
        merged into what was seen before (in the chunks' order)."""
        import numpy as np

        words = (len(self.terms) + _BITS - 1) // _BITS
        if self.unique is None:
            self.unique = np.zeros(0, dtype=np.int64)
            self.known, self.length = np.zeros(0), np.zeros(0)
            self.under = np.zeros((0, words), dtype=np.uint64)
            self.slot = np.zeros(0, dtype=np.int32)
        if self.fresh:
            self._merge(np, words)
        a, c = K1 * (1 - B), K1 * B / self.avgdl
        ups = self.known.copy()
        for i, t in enumerate(self.terms):
            bound = t.bound
            if bound <= 0:
                continue
            cap: Any = bound
            if t.most is not None:
                cap = np.minimum(bound, t.idf * t.most / (t.most + (a + c * self.length)))
            seen = (self.under[:, i // _BITS] >> np.uint64(i % _BITS)) & np.uint64(1)
            ups += np.where(seen.astype(bool), 0.0, cap)
        return self.unique, self.known, ups

    def _merge(self, np: Any, words: int) -> None:
        """Add the postings read since the last call to the chunks seen (no sort of them: each
        seq's place is looked up in ``slot``)."""
        seqs = np.concatenate([f[1] for f in self.fresh])
        parts = np.concatenate([f[2] for f in self.fresh])
        lengths = np.concatenate([f[3] for f in self.fresh])
        which = np.concatenate([np.full(len(f[1]), f[0], dtype=np.int64) for f in self.fresh])
        self.fresh = []
        if not len(seqs):
            return
        top = int(seqs.max()) + 1
        if top > len(self.slot):
            grown = np.zeros(max(top, 2 * len(self.slot)), dtype=np.int32)
            grown[: len(self.slot)] = self.slot
            self.slot = grown
        new = np.sort(seqs[self.slot[seqs] == 0])
        if len(new) > 1:  # without repeats (np.unique hashes: slower here than a sort)
            new = new[np.concatenate(([True], new[1:] != new[:-1]))]
        n = len(self.unique)
        self.slot[new] = np.arange(n + 1, n + 1 + len(new), dtype=np.int32)
        self.unique = np.concatenate([self.unique, new])
        self.known = np.concatenate([self.known, np.zeros(len(new))])
        self.length = np.concatenate([self.length, np.zeros(len(new))])
        self.under = np.concatenate([self.under, np.zeros((len(new), words), dtype=np.uint64)])
        at = self.slot[seqs].astype(np.int64) - 1
        size = len(self.unique)
        self.known += np.bincount(at, weights=parts, minlength=size)
        self.length[at] = lengths
        # A chunk has one posting of a term at most: the sum of its terms' bits is their union
        # (exact in floating point, 32 bits to a word).
        bits = np.ldexp(1.0, which % _BITS)
        for w in range(words):
            mine = which // _BITS == w
            self.under[:, w] += np.bincount(at[mine], weights=bits[mine], minlength=size).astype(
                np.uint64
            )

    def _deeper(self) -> list[int]:
        """The terms to read further. With a threshold, only the essential ones (MaxScore):
        the open terms by bound, lowest first, whose bounds add up to less than the threshold
        cannot lift a chunk to it by themselves, so a chunk unseen in every other list can
        only reach it once the others' bounds fall: those others are read (the rarest of them
        first, as they are the shortest). Without a threshold, those whose unread postings
        could add the most (at least half the largest such bound)."""
        open_ = [i for i, t in enumerate(self.terms) if not t.done]
        theta = self._theta()
        if theta > -math.inf:
            spare, essential = 0.0, []
            for i in sorted(open_, key=lambda i: self.terms[i].bound):
                spare += self.terms[i].bound
                if spare + _EPS >= theta:
                    essential.append(i)
            if essential:
                return sorted(essential)
        most = max(self.terms[i].bound for i in open_)
        return [i for i in open_ if self.terms[i].bound >= most / 2]

    def _probe(self, unique: Any, known: Any) -> None:
        """Score exactly the chunks seen with the ``limit`` best lower bounds, if not yet
        scored: a threshold early (the sum of their parts read so far is often far below
        their score, as their other terms' postings lie deep in long lists)."""
        import numpy as np

        if len(unique) == 0:
            return
        fresh = unique
        if len(known) > self.limit:
            fresh = unique[np.argpartition(-known, self.limit - 1)[: self.limit]]
        if self.checked:
            fresh = fresh[~np.isin(fresh, np.fromiter(self.checked, dtype=np.int64))]
        if len(fresh):
            self._score(fresh.tolist())

    def _cheaper_to_read(self, ups: Any, at: float) -> bool:
        """Whether reading the next slices (which lowers the chunks' upper bounds) costs less
        than scoring the chunks whose upper bound reaches ``at`` now."""
        many = int((ups + _EPS >= at).sum()) - len(self.checked)
        if many <= 2 * self.limit + 8:
            return False
        step = sum(self.terms[i].cost(self.limit) for i in self._deeper())
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
        unique, ups = unique[keep], ups[keep]
        if self.checked:
            keep = ~np.isin(unique, np.fromiter(self.checked, dtype=np.int64))
            unique, ups = unique[keep], ups[keep]
        order = np.lexsort((unique, -ups))
        pending, ups = unique[order].tolist(), ups[order].tolist()
        at = 0
        while at < len(pending):
            theta = self._theta()
            # The first batch a few more than ``limit`` (the best of them set the threshold:
            # often every chunk after them falls below it), then larger ones.
            size = CHECK_BATCH if at else self.limit + 8
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
            (*score_params, ints(seqs), *where_params),
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
                (ints(seq for _, seq in self.best),),
            )
        }
        return [(*found[seq][:6], score) for score, seq in self.best if seq in found]

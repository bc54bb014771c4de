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
from lamina_memory.pgseen import Scratch, Seen

#: Chunks scored exactly per statement.
CHECK_BATCH = 1024
#: What scoring a chunk on its row costs, in postings read from the table (about 5 µs against
#: 0.3 µs; set higher, as reading on often leaves a chunk with its score known and no row to
#: score: 24 read the fewest postings for the time on the scale benchmark, next to 8 and 64).
SCORE_COST = 24
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
    #: The chunks seen, and what was read of each.
    seen: Seen | None = None
    checked: set[int] = field(factory=set)
    #: The best chunks checked so far: (exact score, seq), best first.
    best: list[tuple[float, int]] = field(factory=list)
    #: The stale seqs and the run below which each one's packed postings are dead.
    stale: tuple[Any, Any] = field(factory=lambda: ((), ()))
    #: Postings read and chunks scored (what a test counts).
    read: int = 0
    scored: int = 0
    #: The store's arrays for the chunks seen, used if no other search holds them.
    scratch: Scratch | None = None
    held: Scratch | None = field(default=None, init=False)

    def run(self) -> list[tuple[Any, ...]]:
        scratch = self.scratch
        if scratch is not None and scratch.lock.acquire(blocking=False):
            self.held = scratch
        try:
            return self._run()
        finally:
            held, self.held = self.held, None
            if held is not None:
                held.lock.release()

    def _run(self) -> list[tuple[Any, ...]]:
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
            self._seen_().add(i, seqs, self.terms[i].idf * tf / (tf + (a + c * length)), length)

    def _seen_(self) -> Seen:
        if self.seen is None:
            self.seen = Seen(len(self.terms), self.held)
        return self.seen

    def _seen(self) -> tuple[Any, Any, Any]:
        """Each chunk seen, the sum of its parts read, and its upper bound: those plus, for
        each term it was not seen under, the most that term's unread postings can add to a
        chunk of its length (the term's last impact read, or its highest frequency in a chunk
        of that length, whichever is lower)."""
        import numpy as np

        seen = self._seen_()
        seen.update()
        a, c = K1 * (1 - B), K1 * B / self.avgdl
        ups = seen.known.copy()
        for i, t in enumerate(self.terms):
            bound = t.bound
            if bound <= 0:
                continue
            cap: Any = bound
            if t.most is not None:
                cap = np.minimum(bound, t.idf * t.most / (t.most + (a + c * seen.length)))
            ups += np.where(seen.seen_under(i), 0.0, cap)
        return seen.seqs, seen.known, ups

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
        of the terms it was not seen under) reaches the threshold. A chunk seen under every
        term with postings left has its score already (the parts added as the SQL adds them):
        those are taken best first and only checked against the permissions and filters while
        they can still enter the top; the others are scored on their rows, the most promising
        first (the threshold rises as they are scored)."""
        import numpy as np

        keep = ups + _EPS >= self._theta()
        unique, ups = unique[keep], ups[keep]
        if self.checked:
            keep = ~np.isin(unique, np.fromiter(self.checked, dtype=np.int64))
            unique, ups = unique[keep], ups[keep]
        seen = self._seen_()
        places = seen.places(unique)
        done = seen.resolved(places, [i for i, t in enumerate(self.terms) if not t.done])
        self._take(unique[done], seen.exact(places[done]))
        unique, ups = unique[~done], ups[~done]
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

    def _take(self, seqs: Any, scores: Any) -> None:
        """The chunks ``seqs`` with their exact ``scores``, best first, while they can enter
        the top: those the caller may see join it."""
        import numpy as np

        order = np.lexsort((seqs, -scores))
        seqs, scores = seqs[order].tolist(), scores[order].tolist()
        at = 0
        while at < len(seqs):
            end = at
            while (
                end < len(seqs)
                and end - at < self.limit + 8
                and self._enters(scores[end], seqs[end])
            ):
                end += 1
            if end == at:
                return
            where_sql, where_params = self.where
            rows = self.db.rows(
                f"SELECT c.seq FROM {self.chunks} c WHERE c.seq = ANY(?::bigint[]) AND {where_sql}",
                (ints(seqs[at:end]), *where_params),
            )
            self.checked.update(seqs[at:end])
            self.scored += end - at
            visible = {int(r[0]) for r in rows}
            found = [(scores[k], seqs[k]) for k in range(at, end) if seqs[k] in visible]
            self.best = sorted([*self.best, *found], key=lambda r: (-r[0], r[1]))
            del self.best[self.limit :]
            at = end

    def _enters(self, score: float, seq: int) -> bool:
        """Whether a chunk of that exact score and place would join the top now."""
        if len(self.best) < self.limit:
            return True
        kth = self.best[self.limit - 1]
        return score > kth[0] or (score == kth[0] and seq < kth[1])

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

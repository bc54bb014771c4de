"""What a PostgreSQL BM25 search (``pgtopk``) knows of the chunks it has read postings of: for
each, the sum of the parts read, its length, the terms it was seen under and each term's
exact part, in numpy arrays grown as postings are read (a chunk's place found through a map
from seq to place, so no round sorts what was seen before)."""

from __future__ import annotations

from typing import Any

#: Terms per word of a chunk's flags (the terms it was seen under).
BITS = 32


class Seen:
    """The chunks seen by one search over ``terms`` query terms."""

    def __init__(self, terms: int) -> None:
        import numpy as np

        self.terms = terms
        self.words = (terms + BITS - 1) // BITS
        self.n = 0
        self._seqs = np.zeros(0, dtype=np.int64)
        self._known = np.zeros(0)
        self._length = np.zeros(0)
        self._under = np.zeros((0, self.words), dtype=np.uint64)
        #: Each term's exact part of each chunk (a row per term: a term's parts are written
        #: together).
        self._parts = np.zeros((terms, 0))
        #: Each seq's place plus one (0: not seen), grown as larger seqs are read: 4 bytes per
        #: seq up to the largest read, its pages untouched where none was.
        self._slot = np.zeros(0, dtype=np.int32)
        self._fresh: list[tuple[int, Any, Any, Any]] = []

    @property
    def seqs(self) -> Any:
        return self._seqs[: self.n]

    @property
    def known(self) -> Any:
        return self._known[: self.n]

    @property
    def length(self) -> Any:
        return self._length[: self.n]

    def add(self, term: int, seqs: Any, parts: Any, lengths: Any) -> None:
        """Postings of term ``term`` just read (taken in at the next ``update``)."""
        self._fresh.append((term, seqs, parts, lengths))

    def seen_under(self, term: int) -> Any:
        """Whether each chunk was seen under ``term``."""
        import numpy as np

        word = self._under[: self.n, term // BITS]
        return ((word >> np.uint64(term % BITS)) & np.uint64(1)).astype(bool)

    def update(self) -> None:
        """Take in the postings added since the last call."""
        import numpy as np

        if not self._fresh:
            return
        fresh, self._fresh = self._fresh, []
        seqs = np.concatenate([f[1] for f in fresh])
        if not len(seqs):
            return
        parts = np.concatenate([f[2] for f in fresh])
        lengths = np.concatenate([f[3] for f in fresh])
        top = int(seqs.max()) + 1
        if top > len(self._slot):  # an eighth more: the next reads' seqs are rarely larger
            grown = np.zeros(max(top + top // 8, len(self._slot)), dtype=np.int32)
            grown[: len(self._slot)] = self._slot
            self._slot = grown
        new = np.sort(seqs[self._slot[seqs] == 0])
        if len(new) > 1:  # without repeats (np.unique hashes: slower here than a sort)
            new = new[np.concatenate(([True], new[1:] != new[:-1]))]
        self._grow(self.n + len(new))
        self._slot[new] = np.arange(self.n + 1, self.n + 1 + len(new), dtype=np.int32)
        self._seqs[self.n : self.n + len(new)] = new
        self.n += len(new)
        at = self._slot[seqs].astype(np.int64) - 1
        self._known[: self.n] += np.bincount(at, weights=parts, minlength=self.n)
        self._length[at] = lengths
        start = 0
        for term, got, got_parts, _lengths in fresh:  # each term's part, and its bit set
            mine = at[start : start + len(got)]
            self._parts[term, mine] = got_parts
            self._under[mine, term // BITS] |= np.uint64(1 << (term % BITS))
            start += len(got)

    def _grow(self, size: int) -> None:
        """Room for ``size`` chunks (doubling)."""
        import numpy as np

        if size <= len(self._seqs):
            return
        room = max(size, 2 * len(self._seqs), 1024)

        def more(a: Any) -> Any:
            out = np.zeros((room, *a.shape[1:]), dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        self._seqs, self._known, self._length = (
            more(a) for a in (self._seqs, self._known, self._length)
        )
        self._under = more(self._under)
        parts = np.zeros((self.terms, room))
        parts[:, : self.n] = self._parts[:, : self.n]
        self._parts = parts

    def places(self, seqs: Any) -> Any:
        """The places of the chunks ``seqs`` (seen)."""
        return self._slot[seqs].astype("int64") - 1

    def resolved(self, places: Any, open_terms: list[int]) -> Any:
        """Whether each chunk at ``places`` was seen under every term in ``open_terms`` (the
        terms with postings left unread): its score is then known exactly."""
        import numpy as np

        out = np.ones(len(places), dtype=bool)
        for w in range(self.words):
            need = sum(1 << (i % BITS) for i in open_terms if i // BITS == w)
            if need:
                word = self._under[places, w]
                out &= (word & np.uint64(need)) == np.uint64(need)
        return out

    def exact(self, places: Any) -> Any:
        """The scores of the chunks at ``places`` (resolved) as the store's SQL computes them:
        the terms' parts added in the terms' order (0 for a term a chunk lacks)."""
        parts = self._parts[:, places]
        total = parts[0].copy()
        for i in range(1, self.terms):
            total = total + parts[i]
        return total

"""What a PostgreSQL BM25 search (``pgtopk``) knows of the chunks it has read postings of: for
each, the sum of the parts read, its length, the terms it was seen under and each term's
exact part, in numpy arrays grown as postings are read (a chunk's place found through a map
from seq to place, so no round sorts what was seen before), kept between one store's
searches (``Scratch``)."""

from __future__ import annotations

import threading
from typing import Any

#: Terms per word of a chunk's flags (the terms it was seen under).
BITS = 32
#: The most a store keeps for its searches' arrays of the chunks seen, in bytes (a search
#: that needs more grows its own).
SCRATCH_BYTES = 64 << 20


class Scratch:
    """The arrays one store's BM25 searches reuse, one search at a time (``lock``). Memory a
    process has not touched yet is costly to touch (each page faulted in and zeroed by the
    kernel: on the slowest searches at a million chunks, about a third of their arrays'
    upkeep), so the map from seq to place and the chunks' arrays stay allocated between
    searches, as large as the largest search needed: each place is cleared when a search
    takes it, and the map's entries the previous search set are reset before the next one
    starts."""

    def __init__(self) -> None:
        import numpy as np

        self.lock = threading.Lock()
        self.slot = np.zeros(0, dtype=np.int32)
        #: The most chunks a search has seen: the next one's arrays start that large.
        self.room = 0
        self._flat: dict[str, Any] = {}
        self._last: Seen | None = None

    def begin(self, seen: Seen) -> None:
        """``seen`` starts: the previous search's entries in the map are reset."""
        last, self._last = self._last, seen
        if last is not None:
            self.slot = last._slot  # as that search left it (perhaps grown)
            self.slot[last.seqs] = 0
            self.room = max(self.room, last.n)

    def arrays(self, room: int, terms: int, words: int) -> tuple[Any, Any, Any, Any, Any] | None:
        """Room for ``room`` chunks: seqs, sums, lengths, flags and parts (not cleared); None
        past ``SCRATCH_BYTES``."""
        import numpy as np

        if room * 8 * (3 + words + terms) > SCRATCH_BYTES:
            return None

        def take(name: str, size: int, dtype: Any) -> Any:
            flat = self._flat.get(name)
            if flat is None or len(flat) < size:
                flat = self._flat[name] = np.empty(size, dtype=dtype)
            return flat[:size]

        return (
            take("seqs", room, np.int64),
            take("known", room, np.float64),
            take("length", room, np.float64),
            take("under", room * words, np.uint64).reshape(room, words),
            take("parts", terms * room, np.float64).reshape(terms, room),
        )


class Seen:
    """The chunks seen by one search over ``terms`` query terms; with ``scratch`` (held by
    the caller for the search), in its arrays."""

    def __init__(self, terms: int, scratch: Scratch | None = None) -> None:
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
        self._scratch = scratch
        if scratch is not None:
            scratch.begin(self)
            self._slot = scratch.slot

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
        start, end = self.n, self.n + len(new)
        self._known[start:end] = 0.0  # places taken now: nothing read of them yet
        self._under[start:end] = 0
        self._parts[:, start:end] = 0.0
        self._seqs[start:end] = new
        self.n = end  # (before the map: what the map holds is among ``seqs``, to be reset)
        self._slot[new] = np.arange(start + 1, end + 1, dtype=np.int32)
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
        if self._scratch is not None and not self.n:  # the search's first chunks
            arrays = self._scratch.arrays(max(room, self._scratch.room), self.terms, self.words)
            if arrays is None:
                arrays = self._scratch.arrays(room, self.terms, self.words)
            if arrays is not None:
                self._seqs, self._known, self._length, self._under, self._parts = arrays
                return

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

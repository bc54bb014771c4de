"""``Chunked``: an immutable sequence held in shared chunks, so a context's history (and its
report's blocks) can grow by a turn without copying the thousands of items before it."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any, TypeVar, overload

T = TypeVar("T")


class Chunked(Sequence[T]):
    """A tuple-like immutable sequence kept as a few tuples (chunks). ``grown`` makes a longer
    one that shares this one's chunks, copying only the smaller trailing chunks it merges (the
    chunk sizes fall by at least half from first to last, so there are at most about log2(n)
    chunks and an item is copied about log2(n) times in its life, not once per growth).

    It compares equal to a tuple (or another ``Chunked``) of the same items, hashes like that
    tuple, and adds to tuples; a slice is a tuple."""

    __slots__ = ("_chunks", "_ends", "_hash")

    _chunks: tuple[tuple[T, ...], ...]
    _ends: tuple[int, ...]
    _hash: int | None

    def __init__(self, items: Iterable[T] = ()) -> None:
        first = tuple(items)
        self._set((first,) if first else ())

    @classmethod
    def of(cls, items: Sequence[T]) -> Chunked[T]:
        """``items`` as a ``Chunked`` (itself when it is one)."""
        return items if isinstance(items, Chunked) else cls(items)

    @classmethod
    def joined(cls, parts: Iterable[Sequence[T]]) -> Chunked[T]:
        """``parts`` one after the other: a ``Chunked`` part's chunks are shared, any other
        part is copied into a chunk of its own."""
        chunks: list[tuple[T, ...]] = []
        for part in parts:
            if isinstance(part, Chunked):
                chunks += part._chunks
            elif part:
                chunks.append(tuple(part))
        out: Chunked[T] = cls.__new__(cls)
        out._set(tuple(chunks))
        return out

    def _set(self, chunks: tuple[tuple[T, ...], ...]) -> None:
        ends, total = [], 0
        for chunk in chunks:
            total += len(chunk)
            ends.append(total)
        self._chunks, self._ends, self._hash = chunks, tuple(ends), None

    @property
    def chunks(self) -> tuple[tuple[T, ...], ...]:
        """The tuples that hold the items, in order: the sequences grown from this one hold
        the same tuples (but for the last few, merged), so work done per chunk can be kept."""
        return self._chunks

    def grown(self, more: Iterable[T]) -> Chunked[T]:
        """This sequence's items then ``more``'s, sharing this one's chunks."""
        tail = tuple(more)
        if not tail:
            return self
        chunks = list(self._chunks)
        while chunks and len(chunks[-1]) <= 2 * len(tail):
            tail = chunks.pop() + tail
        out: Chunked[T] = type(self).__new__(type(self))
        out._set((*chunks, tail))
        return out

    def startswith(self, prefix: Chunked[T]) -> bool:
        """Whether ``prefix``'s items begin this sequence; answered from the shared chunks
        alone when this one was ``grown`` from ``prefix`` (else item by item)."""
        n = len(prefix)
        if n > len(self):
            return False
        if self.shares(prefix):
            return True
        return all(a is b or a == b for a, b in zip(prefix, self, strict=False))

    def shares(self, prefix: Chunked[T]) -> bool:
        """Whether this sequence holds ``prefix``'s items as they are (it was ``grown`` from
        ``prefix``): its chunks lead this one's, but for its last few, which this one merged
        into one of its own (the items themselves, checked by identity)."""
        mine, theirs = self._chunks, prefix._chunks
        k = 0
        while k < len(theirs) and k < len(mine) and mine[k] is theirs[k]:
            k += 1
        if k == len(theirs):
            return True
        # The rest of ``prefix`` was merged into ``mine[k]``: its items lead that chunk.
        if k >= len(mine):
            return False
        rest = sum(len(c) for c in theirs[k:])
        merged = mine[k]
        if len(merged) < rest:
            return False
        at = 0
        for chunk in theirs[k:]:
            for item in chunk:
                if merged[at] is not item:
                    return False
                at += 1
        return True

    # -- Sequence ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __reversed__(self) -> Iterator[T]:
        return chain.from_iterable(map(reversed, reversed(self._chunks)))

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return tuple(self)[index]
            if stop <= start:
                return ()
            k = bisect_right(self._ends, start)  # (from the chunk that holds ``start``)
            offset = self._ends[k - 1] if k else 0
            if stop <= self._ends[k]:
                return self._chunks[k][start - offset : stop - offset]
            rest = chain.from_iterable(self._chunks[k:])
            return tuple(islice(rest, start - offset, stop - offset))
        n = len(self)
        at = index + n if index < 0 else index
        if not 0 <= at < n:
            raise IndexError("Chunked index out of range")
        k = bisect_right(self._ends, at)
        return self._chunks[k][at - (self._ends[k - 1] if k else 0)]

    def __contains__(self, value: object) -> bool:
        return any(value in chunk for chunk in self._chunks)

    # -- as a tuple --------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Chunked):
            if len(other) != len(self):
                return False
            if self._chunks == other._chunks:  # (identical chunks compare at C speed)
                return True
            return all(a is b or a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, tuple):
            return len(other) == len(self) and all(
                a is b or a == b for a, b in zip(self, other, strict=True)
            )
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __add__(self, other: object) -> Chunked[T]:
        if isinstance(other, tuple | Chunked):
            return self.grown(other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[Any, ...]:
        if isinstance(other, tuple):
            return other + tuple(self)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (Chunked, (tuple(self),))

"""Where each token of a text starts, as truncation cuts on: a character offset per token.

Truncation asks for the offsets of a few tokens of a text, whatever its length: where a cut
falls, tried a few times. For a long text (a file read, a log, a Loom document) each is
computed when asked for, from the nearest offset already known, a run of tokens decoded at
once, and the last few long texts' are kept: a big tool result capped on every request of a
session is tokenized once, not on every request.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

#: UTF-8 continuation bytes: a token that starts with one starts inside a character.
_CONTINUATION = bytes(range(0x80, 0xC0))


def _chars(token: bytes) -> int:
    """The characters that start in ``token`` (its bytes that are not continuation bytes)."""
    return len(token.translate(None, _CONTINUATION))


def _inside(token: bytes) -> int:
    """1 when ``token`` starts inside a character (the offset is that character's), else 0."""
    return 1 if 0x80 <= token[0] < 0xC0 else 0


def offsets_of(tokens: Iterable[bytes]) -> list[int]:
    """The offset of each token of a text given as its tokens' bytes, in order."""
    offsets: list[int] = []
    chars = 0
    for token in tokens:
        offsets.append(chars - _inside(token))
        chars += _chars(token)
    return offsets


class Offsets(Sequence[int]):
    """The offsets of a text's tokens (``ids``, ``length`` characters; ``token_bytes``
    gives a token's bytes, ``run_bytes`` a run of tokens' bytes at once), each computed when
    first asked for. A text's characters are its tokens' lead bytes, so the characters before
    a token are those before a known one plus, or minus, the lead bytes of the tokens between:
    an offset is found from the nearest known one (at first the text's start and end), and
    is known from then on. Equal to the list of the same offsets; safe to share between
    threads."""

    __slots__ = ("_at", "_before", "_ids", "_length", "_lock", "_run", "_token")

    def __init__(
        self,
        ids: array[int],
        length: int,
        token_bytes: Callable[[int], bytes],
        run_bytes: Callable[[Sequence[int]], bytes] | None = None,
    ) -> None:
        self._ids = ids
        self._length = length
        self._token = token_bytes
        self._run = run_bytes
        # Token indices whose offset is known, ascending, and the characters before each.
        self._at: array[int] = array("q", [0, len(ids)])
        self._before: array[int] = array("q", [0, length])
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        n = len(self._ids)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("token index out of range")
        with self._lock:
            before = self._chars_before(i)
        return before - _inside(self._token(self._ids[i]))

    def _chars_before(self, i: int) -> int:
        """The characters of the tokens before token ``i``, from the nearest known offset."""
        at, before = self._at, self._before
        k = bisect_right(at, i) - 1  # at[k] <= i < at[k + 1]: the text's end is known
        if at[k] == i:
            return before[k]
        if i - at[k] <= at[k + 1] - i:
            found = before[k] + self._chars(at[k], i)
        else:
            found = before[k + 1] - self._chars(i, at[k + 1])
        at.insert(k + 1, i)
        before.insert(k + 1, found)
        return found

    def _chars(self, start: int, stop: int) -> int:
        """The characters that start in tokens ``start`` to ``stop`` (excluded)."""
        if self._run is not None:
            return _chars(self._run(self._ids[start:stop]))
        token = self._token
        return sum(_chars(token(found)) for found in self._ids[start:stop])

    def __iter__(self) -> Iterator[int]:
        return iter(offsets_of(map(self._token, self._ids)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Offsets({len(self)} tokens of a text of {self._length} characters)"


class LongTexts:
    """The offsets of the last long texts asked for, by the text itself (a string keeps its
    hash, so the same string is found again at once), at most ``tokens`` tokens in all."""

    def __init__(self, tokens: int) -> None:
        self._limit = tokens
        self._held = 0
        self._found: dict[str, Sequence[int]] = {}
        self._lock = threading.Lock()

    def get(self, text: str, make: Callable[[str], Sequence[int]]) -> Sequence[int]:
        """``text`` 's offsets, made by ``make`` when not kept (and then kept)."""
        with self._lock:
            found = self._found.pop(text, None)
            if found is not None:
                self._found[text] = found  # the newest again
                return found
        made = make(text)
        with self._lock:
            if text not in self._found:
                self._found[text] = made
                self._held += len(made)
            while self._held > self._limit and len(self._found) > 1:
                oldest = next(iter(self._found))
                self._held -= len(self._found.pop(oldest))
        return made

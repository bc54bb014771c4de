"""Where each token of a text starts, as truncation cuts on: a character offset per token.

Truncation asks for the offsets of the first and the last few thousand tokens of a text,
whatever its length. For a long text (a file read, a log) they are computed as they are asked
for, from the nearer end, and the last few long texts' are kept: a big tool result capped on
every request of a session is tokenized once, not on every request.
"""

from __future__ import annotations

import threading
from array import array
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
    gives a token's bytes), each computed when first asked for: the first ones from the
    start, the last ones from the end (a text's characters are its tokens' lead bytes, so an
    offset is also ``length`` less the characters from it on). Equal to the list of the same
    offsets; safe to share between threads."""

    __slots__ = (
        "_head",
        "_head_chars",
        "_ids",
        "_length",
        "_lock",
        "_tail",
        "_tail_chars",
        "_token",
    )

    def __init__(self, ids: array[int], length: int, token_bytes: Callable[[int], bytes]) -> None:
        self._ids = ids
        self._length = length
        self._token = token_bytes
        self._head: array[int] = array("q")  # offsets of tokens 0, 1, ...
        self._head_chars = 0  # characters of those tokens
        self._tail: array[int] = array("q")  # offsets of tokens n-1, n-2, ...
        self._tail_chars = 0
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
        if i < len(self._head):
            return self._head[i]
        if n - 1 - i < len(self._tail):
            return self._tail[n - 1 - i]
        with self._lock:
            if i - len(self._head) <= n - 1 - i - len(self._tail):
                self._extend_head(i + 1)
                return self._head[i]
            self._extend_tail(n - i)
            return self._tail[n - 1 - i]

    def _extend_head(self, count: int) -> None:
        head, ids, token, chars = self._head, self._ids, self._token, self._head_chars
        for j in range(len(head), count):
            found = token(ids[j])
            head.append(chars - _inside(found))
            chars += _chars(found)
        self._head_chars = chars

    def _extend_tail(self, count: int) -> None:
        tail, ids, token, chars = self._tail, self._ids, self._token, self._tail_chars
        n = len(ids)
        for j in range(n - 1 - len(tail), n - 1 - count, -1):
            found = token(ids[j])
            chars += _chars(found)
            tail.append(self._length - chars - _inside(found))
        self._tail_chars = chars

    def __iter__(self) -> Iterator[int]:
        with self._lock:
            self._extend_head(len(self._ids))
        return iter(self._head)

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

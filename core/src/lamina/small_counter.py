"""The small-text counter: tiktoken's exact counts for the first texts a process counts,
without building tiktoken's BPE.

Building tiktoken's ``CoreBPE`` for o200k_base costs a start about 0.1 s (reading 200,000
ranks into a dict, then Rust copying them into its own tables while holding the GIL), more
than counting the few thousand tokens a command-line start needs. This counter splits text
with tiktoken's own pattern through the ``regex`` module (a tiktoken dependency) and looks
ranks up in a table file in Lamina's cache directory, memory-mapped and read in place: an
open-addressing hash table of the ranks, built once from the verified ranks
(``lamina.encodings``) and used only when its sha256 is the one in ``TABLE_HASHES``. The
merges are tiktoken's, done in Python: several times slower per token than tiktoken, so a
tokenizer counts with it only its first ``SMALL_UNTIL`` characters (``lamina.tokens``), then
builds tiktoken.

It answers only where core/tests/test_tokens_small.py proved it gives tiktoken's ids (every
code point in context, the standard library's sources, hostile and random text): with the
``regex`` and tiktoken versions of ``SMALL_VERSIONS``, for text holding no code point the two
class differently (``SMALL_UNLIKE``), no lone surrogate and no piece longer than
``LONG_PIECE`` bytes (merging is quadratic here). Elsewhere ``count`` gives ``None``: tiktoken
counts that text.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import mmap
import sys
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any
from zlib import crc32

__all__ = [
    "LONG_PIECE",
    "PATTERNS",
    "SMALL_UNLIKE",
    "SMALL_VERSIONS",
    "TABLE_HASHES",
    "SmallCounter",
    "load_small",
    "proven_versions",
    "table_bytes",
]

#: Each encoding's split pattern, as tiktoken's own constructor gives it (a test compares).
PATTERNS: dict[str, str] = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
        r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}
#: (regex, tiktoken) versions proven to split alike outside ``SMALL_UNLIKE``.
SMALL_VERSIONS: frozenset[tuple[str, str]] = frozenset({("2026.11.19", "0.14.0")})
#: Code point ranges the two versions' Unicode tables class differently (none assigned in
#: tiktoken's Unicode 16; found by the test's sweep of every code point, both encodings).
SMALL_UNLIKE: tuple[tuple[int, int], ...] = (
    (0x0558, 0x0558),
    (0x058B, 0x058C),
    (0x05C8, 0x05C9),
    (0x088F, 0x088F),
    (0x0B53, 0x0B54),
    (0x0C5C, 0x0C5C),
    (0x0CDC, 0x0CDC),
    (0x1ACF, 0x1AF0),
    (0x208F, 0x208F),
    (0x209D, 0x209F),
    (0xA7CE, 0xA7CF),
    (0xA7D2, 0xA7D2),
    (0xA7D4, 0xA7D4),
    (0xA7DD, 0xA7DD),
    (0xA7E2, 0xA7E2),
    (0xA7F1, 0xA7F1),
    (0xAB6C, 0xAB6D),
    (0x107BB, 0x107BF),
    (0x10940, 0x10959),
    (0x10EC5, 0x10EC7),
    (0x10ECB, 0x10ECF),
    (0x10ED9, 0x10EEE),
    (0x10EF0, 0x10EFB),
    (0x11B0A, 0x11B0A),
    (0x11B60, 0x11B67),
    (0x11DB0, 0x11DDB),
    (0x11DE0, 0x11DE9),
    (0x11DF0, 0x11DF1),
    (0x1246F, 0x1246F),
    (0x12475, 0x1247F),
    (0x12550, 0x12686),
    (0x16EA0, 0x16EB8),
    (0x16EBB, 0x16ED3),
    (0x16FF2, 0x16FF6),
    (0x187F8, 0x187FF),
    (0x18CD6, 0x18CDA),
    (0x18D09, 0x18D20),
    (0x18D80, 0x18DF2),
    (0x18E00, 0x19191),
    (0x191A0, 0x191D2),
    (0x1B123, 0x1B128),
    (0x1B168, 0x1B168),
    (0x1D127, 0x1D128),
    (0x1D250, 0x1D252),
    (0x1D25B, 0x1D25C),
    (0x1D25F, 0x1D25F),
    (0x1D280, 0x1D281),
    (0x1D6A6, 0x1D6A6),
    (0x1DF1F, 0x1DF24),
    (0x1DF2B, 0x1DF81),
    (0x1DF90, 0x1DF96),
    (0x1DFCD, 0x1DFFF),
    (0x1E6C0, 0x1E6DE),
    (0x1E6E0, 0x1E6F5),
    (0x1E6FE, 0x1E6FF),
    (0x2B73A, 0x2B73F),
    (0x2B81E, 0x2B81E),
    (0x2CEA2, 0x2CEAD),
    (0x323B0, 0x33479),
    (0x3D000, 0x3FC3F),
)
#: Pieces longer than this (in UTF-8 bytes) are left to tiktoken.
LONG_PIECE = 1024
#: sha256 of each encoding's table file, as ``table_bytes`` builds it from the ranks.
TABLE_HASHES: dict[str, str] = {
    "cl100k_base": "a035433e0ce0275c67e46f12db2067815b0e174295abe8b9a061dbcad26439f8",
    "o200k_base": "299492202d1c311cd495ddd415bccee578d0ad1609d64d12f206fa15427c1e12",
}
_MAGIC = "lamina-rank-table 1"
_HEADER = 64
_NONE = 1 << 32  # no rank: above every rank, as tiktoken's Rank::MAX
_MEMO = 65_536  # pieces whose counts are remembered (then forgotten all at once)


def _slot_count(tokens: int) -> int:
    """A power of two at least twice ``tokens``: probes stay short."""
    size = 1
    while size < 2 * tokens:
        size *= 2
    return size


def table_bytes(name: str, ranks: dict[bytes, int]) -> bytes | None:
    """The table file for ``ranks``: a 64-byte header, the slots (rank + 1, 0 for none), each
    token's end offset (32-bit little endian), then the tokens in rank order; ``None`` when
    the ranks are not 0..n-1 or the machine is not little endian (the file is read in place)."""
    if sys.byteorder != "little":
        return None
    tokens = sorted(ranks, key=ranks.__getitem__)
    if [ranks[t] for t in tokens] != list(range(len(tokens))):
        return None
    size = _slot_count(len(tokens))
    mask = size - 1
    slots = array("I", bytes(4 * size))
    ends = array("I")
    end = 0
    for rank, token in enumerate(tokens):
        h = crc32(token) & mask
        while slots[h]:
            h = (h + 1) & mask
        slots[h] = rank + 1
        end += len(token)
        ends.append(end)
    header = f"{_MAGIC} {name} {len(tokens)} {size}\n".encode()
    return header.ljust(_HEADER, b"\0") + slots.tobytes() + ends.tobytes() + b"".join(tokens)


def _lookup(data: Any, name: str) -> Callable[[bytes], int]:
    """A token's rank (``_NONE`` for none) read from a table file's bytes in place."""
    fields = bytes(data[:_HEADER]).rstrip(b"\0").decode().split()
    if fields[:3] != [*_MAGIC.split(), name] or len(fields) != 5:
        raise ValueError(f"not the rank table of {name}")
    count, size = int(fields[3]), int(fields[4])
    view = memoryview(data)
    slots = view[_HEADER : _HEADER + 4 * size].cast("I")
    ends = view[_HEADER + 4 * size : _HEADER + 4 * (size + count)].cast("I")
    base = _HEADER + 4 * (size + count)
    mask = size - 1

    def rank(token: bytes) -> int:
        h = crc32(token) & mask
        while found := slots[h]:
            if data[base + (ends[found - 2] if found > 1 else 0) : base + ends[found - 1]] == token:
                return found - 1
            h = (h + 1) & mask
        return _NONE

    return rank


def _merged(piece: bytes, rank: Callable[[bytes], int]) -> list[int]:
    """Where tiktoken's byte-pair merge cuts ``piece`` (two bytes or more; its start and end
    included): merge the lowest-ranked adjacent pair, the first of equals, until no adjacent
    pair is a token."""
    bounds = list(range(len(piece) + 1))
    ranks = [rank(piece[i : i + 2]) for i in range(len(piece) - 1)]
    ranks += (_NONE, _NONE)
    while (lowest := min(ranks)) != _NONE:
        i = ranks.index(lowest)
        del bounds[i + 1], ranks[i + 1]
        ranks[i] = rank(piece[bounds[i] : bounds[i + 2]]) if i + 2 < len(bounds) else _NONE
        if i:
            ranks[i - 1] = rank(piece[bounds[i - 1] : bounds[i + 1]])
    return bounds


class SmallCounter:
    """tiktoken's count of a text, or ``None`` where it is not proven to be (see above)."""

    __slots__ = ("_memo", "_rank", "_split", "_table", "_unlike", "name")

    def __init__(
        self, name: str, table: Any, *, unlike: tuple[tuple[int, int], ...] = SMALL_UNLIKE
    ) -> None:
        """``table``: a table file's bytes (or a read-only mapping of it, kept open);
        ``unlike``: the code points whose text is declined."""
        import regex  # type: ignore[import-untyped, unused-ignore]

        self.name = name
        self._table = table
        self._rank = _lookup(table, name)
        self._split: Callable[[str], list[str]] = regex.compile(PATTERNS[name]).findall
        ranges = "".join(f"{chr(a)}-{chr(b)}" for a, b in unlike)
        self._unlike = regex.compile(f"[{ranges}]").search if ranges else None
        self._memo: dict[str, int] = {}

    def count(self, text: str) -> int | None:
        if self._unlike is not None and not text.isascii() and self._unlike(text):
            return None
        memo = self._memo
        if len(memo) > _MEMO:
            memo.clear()
        total = 0
        for piece in self._split(text):
            tokens = memo.get(piece)
            if tokens is None:
                tokens = self._piece(piece)
                if tokens is None:
                    return None
                memo[piece] = tokens
            total += tokens
        return total

    def clear(self) -> None:
        """Forget the pieces' remembered counts."""
        self._memo.clear()

    def encode(self, text: str) -> list[int] | None:
        """tiktoken's ids for ``text`` (slower than ``count``: nothing is remembered)."""
        if self._unlike is not None and not text.isascii() and self._unlike(text):
            return None
        ids: list[int] = []
        for piece in self._split(text):
            data = self._bytes(piece)
            if data is None:
                return None
            found = self._rank(data)
            if found != _NONE:
                ids.append(found)
                continue
            bounds = _merged(data, self._rank)
            ids += (self._rank(data[a:b]) for a, b in itertools.pairwise(bounds))
        return ids

    def _piece(self, piece: str) -> int | None:
        data = self._bytes(piece)
        if data is None:
            return None
        if self._rank(data) != _NONE:
            return 1
        return len(_merged(data, self._rank)) - 1

    @staticmethod
    def _bytes(piece: str) -> bytes | None:
        """The UTF-8 bytes of a piece this counter takes (not too long, no lone surrogate)."""
        try:
            data = piece.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return data if len(data) <= LONG_PIECE else None


def _table_path(root: Path, name: str) -> Path:
    return root / "bpe" / f"{name}-{TABLE_HASHES[name]}.table"


def _mapped(path: Path, digest: str) -> mmap.mmap | None:
    """The table file mapped read-only, if it is there and its sha256 is ``digest``."""
    try:
        with open(path, "rb") as file:
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable or empty
        return None
    if hashlib.sha256(mapped).hexdigest() != digest:
        mapped.close()
        return None
    return mapped


def proven_versions() -> bool:
    """Whether the installed ``regex`` and tiktoken are a pair in ``SMALL_VERSIONS`` (with
    others the counter is not loaded: tiktoken counts, slower and as exact)."""
    try:
        import regex  # type: ignore[import-untyped, unused-ignore]
        import tiktoken
    except ImportError:
        return False
    return (regex.__version__, tiktoken.__version__) in SMALL_VERSIONS


@functools.cache
def load_small(name: str) -> SmallCounter | None:
    """The small-text counter of encoding ``name``, or ``None`` (tiktoken counts): when there
    is no cache directory, ``regex`` or tiktoken is a version not in ``SMALL_VERSIONS``, or
    the table cannot be built. The table is read from the cache, else built from the verified
    ranks and stored for the next start."""
    from lamina.encodings import cache_dir, load_ranks, write_atomically

    digest = TABLE_HASHES.get(name)
    root = cache_dir()
    if not digest or root is None or not proven_versions():
        return None
    path = _table_path(root, name)
    mapped = _mapped(path, digest)
    if mapped is not None:
        return SmallCounter(name, mapped)
    data = table_bytes(name, load_ranks(name))
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        return None
    write_atomically(path, data)
    return SmallCounter(name, data)

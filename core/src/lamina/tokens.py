"""Tokenizers as the kernel uses them: the exact tiktoken encodings and the character
estimate (``lamina.tokenizers``), a checked wrapper naming the plugin that supplied a
tokenizer, and a memoizing counter.

tiktoken is imported only inside functions so that importing lamina stays fast; the encodings
themselves are loaded by ``lamina.encodings`` (re-exported here, where they were first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from lamina.blank_runs import BLANK_RUN, ORDINARY_LIMIT, cut_blank_runs
from lamina.checked_tokenizer import CheckedTokenizer
from lamina.digests import sha256
from lamina.encodings import (
    CACHE_HASHES,
    ENCODING_HASHES,
    cache_dir,
    encoding_for_model,
    load_encoding,
    load_fast,
)
from lamina.joins import splits_between
from lamina.records import Tokenizer
from lamina.tokenizers import (
    FAST_AFTER,
    LONG_TEXT,
    LONG_TEXT_TOKENS,
    SMALL_UNTIL,
    EstimateTokenizer,
    TiktokenTokenizer,
)

__all__ = [
    "BLANK_RUN",
    "CACHE_HASHES",
    "ENCODING_HASHES",
    "FAST_AFTER",
    "LONG_TEXT",
    "LONG_TEXT_TOKENS",
    "ORDINARY_LIMIT",
    "SMALL_UNTIL",
    "CheckedTokenizer",
    "EstimateTokenizer",
    "TiktokenTokenizer",
    "TokenCounter",
    "cache_dir",
    "cut_blank_runs",
    "encoding_for_model",
    "load_encoding",
    "load_fast",
]

#: The kernel's tokenizers, whose answers need no checking.
_OWN = (TiktokenTokenizer, EstimateTokenizer)
#: Counts memoized per generation (see ``TokenCounter``): about 100 MB at most in all.
GENERATION = 500_000
#: Recurring texts memoized by the string itself (``TokenCounter.count_recurring``).
RECURRING = 64


def _key(text: str) -> bytes:
    """A text's key in ``TokenCounter`` 's memo: its sha256 digest."""
    data = text.encode("utf-8", "surrogatepass")
    digest: bytes = sha256(data).digest()
    return digest


class TokenCounter:
    """Memoizes ``tokenizer.count`` by a caller-supplied key or a sha256 digest of the text
    (``lamina.digests``: a fraction of counting's cost), so the same content is tokenized
    once; safe to share between threads.

    Each new count is checked (``CheckedTokenizer``), so a plugin's bad count is an error
    naming ``plugin``; ``checked`` is the tokenizer to hand truncators and summarizers. The
    counter is itself a ``Tokenizer`` of the model's, counting through the memo: a plugin that
    sizes text ahead of assembly (the ledger) hands it wherever a tokenizer is asked for."""

    __slots__ = (
        "_cache",
        "_lock",
        "_old",
        "_recurring",
        "_splits",
        "checked",
        "hits",
        "misses",
        "tokenizer",
    )

    def __init__(self, tokenizer: Tokenizer, plugin: str | None = None) -> None:
        self.tokenizer = tokenizer
        self.checked = CheckedTokenizer(tokenizer, plugin)
        encoding = tokenizer.encoding if type(tokenizer) is TiktokenTokenizer else None
        self._splits = splits_between(encoding)
        self.hits = 0
        self.misses = 0
        # Two generations: a count not used since ``GENERATION`` new ones were memoized is
        # forgotten (each request's event adds a few, so the memo must not keep them all).
        self._cache: dict[str | bytes, int] = {}
        self._old: dict[str | bytes, int] = {}
        self._recurring: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.tokenizer.name

    @property
    def exact(self) -> bool:
        return self.tokenizer.exact

    def boundaries(self, text: str) -> Sequence[int]:
        """Where each token of ``text`` starts: the kernel's tokenizers' own answer (theirs
        keep a long text's), a plugin's checked (``CheckedTokenizer``)."""
        if type(self.tokenizer) in _OWN:
            return self.tokenizer.boundaries(text)
        return self.checked.boundaries(text)

    def count(self, text: str, key: str | None = None) -> int:
        """Tokens in ``text``; ``key`` (a content hash) must identify ``text`` when given."""
        cache_key: str | bytes = key if key is not None else _key(text)
        cached = self._memoized(cache_key)
        if cached is not None:
            with self._lock:
                self.hits += 1
            return cached
        try:
            value: object = self.tokenizer.count(text)
        except Exception:
            value = None
        if type(value) is not int or value < 0:  # the checked call converts or names the plugin
            value = self.checked.count(text)
        value = self._put(cache_key, value)
        with self._lock:
            self.misses += 1
        return value

    def count_recurring(self, text: str) -> int:
        """Tokens in ``text``, memoized by the string itself as well: for the few texts a
        caller makes again as the same string object (a system prompt joined once), whose
        lookup then takes the hash the string keeps instead of a new digest of it. At most
        ``RECURRING`` such texts are kept."""
        found = self._recurring.get(text)
        if found is not None:
            with self._lock:
                self.hits += 1
            return found
        found = self.count(text)
        with self._lock:
            if len(self._recurring) >= RECURRING:
                self._recurring = {}
            self._recurring[text] = found
        return found

    def known(self, text: str) -> int | None:
        """``text`` 's memoized count, or ``None`` when it was not counted yet."""
        return self._memoized(_key(text))

    def count_joined(self, pieces: Sequence[str], separator: str, joined: str | None = None) -> int:
        """Tokens in ``separator.join(pieces)`` (``joined``, when the caller has it; memoized
        as that text's count), counted piece by piece (each memoized) where the tokenizer's
        split shows a join cannot merge tokens across it (``lamina.joins``), else the runs
        between such joins counted whole."""
        if joined is None:
            joined = separator.join(pieces)
        splits = self._splits
        if splits is None or len(pieces) < 2:
            return self.count(joined)
        total, run = 0, pieces[0]
        for piece in pieces[1:]:
            left = run + separator
            if splits(left, piece):
                total += self.count(left)
                run = piece
            else:
                run = left + piece
        total += self.count(run)
        return self._put(_key(joined), total)

    def remember(self, key: str, compute: Callable[[], int]) -> int:
        """A count memoized under ``key`` (e.g. a block's hash) and computed once."""
        cached = self._memoized(key)
        return cached if cached is not None else self._put(key, compute())

    def clear(self) -> None:
        """Forget every memoized count (the tokenizer's counts changed)."""
        with self._lock:
            self._cache, self._old, self._recurring = {}, {}, {}

    def _memoized(self, key: str | bytes) -> int | None:
        """The count memoized under ``key`` (one of the older generation is brought into
        the current one), or ``None``."""
        found = self._cache.get(key)
        if found is not None:
            return found
        found = self._old.get(key)
        return None if found is None else self._put(key, found)

    def _put(self, key: str | bytes, value: int) -> int:
        """Memoize a count (the first one memoized for ``key`` wins); a full generation
        becomes the older one first."""
        if len(self._cache) >= GENERATION:
            with self._lock:
                if len(self._cache) >= GENERATION:
                    self._old, self._cache = self._cache, {}
        return self._cache.setdefault(key, value)

    def __repr__(self) -> str:
        return (
            f"TokenCounter({self.tokenizer.name!r}, entries={len(self._cache) + len(self._old)}, "
            f"hits={self.hits}, misses={self.misses})"
        )

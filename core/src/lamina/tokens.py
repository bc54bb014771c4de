"""Tokenizers: exact tiktoken encodings, a character estimate, a checked wrapper naming the
plugin that supplied a tokenizer, and a memoizing counter.

tiktoken is imported only inside functions so that importing lamina stays fast; the encodings
themselves are loaded by ``lamina.encodings`` (re-exported here, where they were first).
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from attrs import define, field, validators

from lamina.blank_runs import BLANK_RUN, CUTTABLE, ORDINARY_LIMIT, Segment, cut_blank_runs
from lamina.checked_tokenizer import CheckedTokenizer
from lamina.encodings import (
    BUILT,
    CACHE_HASHES,
    ENCODING_HASHES,
    FastCounter,
    cache_dir,
    encoding_for_model,
    load_encoding,
    load_fast,
)
from lamina.joins import splits_between
from lamina.records import Tokenizer
from lamina.small_counter import SmallCounter, load_small

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "BLANK_RUN",
    "CACHE_HASHES",
    "ENCODING_HASHES",
    "FAST_AFTER",
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
]

# Lone surrogates cannot be UTF-8 encoded; each is replaced by U+FFFD. Unlike the data
# model's ``clean`` this keeps the length, so boundaries stay offsets into the caller's text.
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Characters a tokenizer counts with tiktoken before it loads the fast exact counter (the
#: ``lamina[fast]`` extra), when installed: about half a second of tiktoken's counting, what
#: loading the fast counter costs, so a short-lived process never pays for a load it would not
#: recover, and a long-running one counts the rest about four times as fast.
FAST_AFTER = 8_000_000
#: Characters a tokenizer counts with the small-text counter (``lamina.small_counter``) before
#: it builds tiktoken's BPE: the build costs about what counting a million characters there
#: does, so a command-line start (tens of thousands) never builds it.
SMALL_UNTIL = 500_000
_NO_SPECIAL: frozenset[str] = frozenset()
#: Encodings whose BPE this process built (``lamina.encodings.load_encoding``, by a tokenizer
#: or by the host): from then on every tokenizer of the encoding counts with it (a new
#: assembler's tokenizer does not start on the small counter).
_BUILT: set[str] = BUILT


# ``Tokenizer`` declares ``name`` and ``exact`` as plain (settable) attributes, which mypy
# does not let a frozen class satisfy; the tokenizers are therefore mutable attrs classes.


@define
class TiktokenTokenizer:
    """Exact token counts for one tiktoken encoding; special-token text counts as plain text.

    Text tiktoken's regex cannot split (a million blanks) is encoded in exact pieces; should
    tiktoken fail on some text anyway, it is charged one token per UTF-8 byte, a safe upper
    bound (no token is shorter than a byte).

    The first ``small_until`` characters (``SMALL_UNTIL``; ``None``: none) are counted
    without building tiktoken's BPE, by ``lamina.small_counter`` (tiktoken's counts, proven),
    where it answers. With the ``lamina[fast]`` extra installed, counts of text shorter than
    ``ORDINARY_LIMIT`` come from quicktok (``lamina.encodings.load_fast``: tiktoken's ids,
    proven) once ``fast_after`` characters were counted (``FAST_AFTER``; 0: at once,
    ``None``: never)."""

    encoding: str
    fast_after: int | None = field(default=FAST_AFTER, kw_only=True, eq=False)
    small_until: int | None = field(default=SMALL_UNTIL, kw_only=True, eq=False)
    name: str = field(init=False)
    exact: bool = field(default=True, init=False)
    # The fast counter once loaded; the characters left to count before trying to load it.
    _fast: FastCounter | None = field(default=None, init=False, repr=False, eq=False)
    _until_fast: int | None = field(init=False, repr=False, eq=False)
    # The characters the small-text counter may still count (``None``: tiktoken from now on).
    _until_small: int | None = field(init=False, repr=False, eq=False)
    _small: SmallCounter | None = field(default=None, init=False, repr=False, eq=False)
    # tiktoken's encoding and its BPE, built when first needed.
    _encoding: tiktoken.Encoding | None = field(default=None, init=False, repr=False, eq=False)
    _core: Any = field(default=None, init=False, repr=False, eq=False)
    # The pieces cut out of text the regex cannot split, for the few texts in use: a long
    # piece takes about a second, and fitting counts one text several times.
    _cut: Callable[[str], list[int]] | None = field(default=None, init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.encoding not in ENCODING_HASHES:
            load_encoding(self.encoding)  # the error naming the known encodings, at once

    @name.default
    def _name(self) -> str:
        return self.encoding

    @_until_fast.default
    def _fast_budget(self) -> int | None:
        return self.fast_after

    @_until_small.default
    def _small_budget(self) -> int | None:
        return self.small_until

    @property
    def _enc(self) -> tiktoken.Encoding:
        if self._encoding is None:
            self._encoding = load_encoding(self.encoding)
            _BUILT.add(self.encoding)
        return self._encoding

    def _bpe(self) -> Any:
        if self._core is None:
            self._core = self._enc._core_bpe
        return self._core

    def _piece(self, text: str) -> list[int]:
        if self._cut is None:
            self._cut = functools.lru_cache(maxsize=16)(self._enc._encode_single_piece)
        return self._cut(text)

    def _count_small(self, text: str) -> int | None:
        """The small-text counter's count while its budget lasts, else ``None``."""
        left = self._until_small
        if left is None or len(text) > left or self.encoding in _BUILT:
            self._until_small = None
            return None
        if self._small is None:
            self._small = load_small(self.encoding)
            if self._small is None:
                self._until_small = None
                return None
        found = self._small.count(text)
        if found is not None:
            self._until_small = left - len(text)
        return found

    @property
    def fast(self) -> bool:
        """Whether counts now come from the fast exact counter."""
        return self._fast is not None

    @property
    def built(self) -> bool:
        """Whether tiktoken's BPE was built (the small-text counter did not do for all)."""
        return self._core is not None

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        if len(text) < ORDINARY_LIMIT:
            if self._fast is not None:
                fast = self._fast.count(text)
                if fast is not None:
                    return fast
            elif self._until_fast is not None:
                self._until_fast -= len(text)
                if self._until_fast <= 0:
                    self._until_fast = None  # one attempt
                    self._fast = load_fast(self.encoding)
        if self._until_small is not None and self._fast is None:
            small = self._count_small(text)
            if small is not None:
                return small
        try:
            if len(text) < ORDINARY_LIMIT:
                return len(self._bpe().encode_ordinary(text))
            return len(self._bpe().encode(text, _NO_SPECIAL))
        except ValueError:  # a lone surrogate, or text the regex cannot split
            return sum(map(len, self._segments(text)))

    def boundaries(self, text: str) -> list[int]:
        """Character offset where each token starts; a token that begins inside a multi-byte
        character gets that character's offset, so cutting there never splits a character."""
        offsets: list[int] = []
        chars = 0
        for segment in self._segments(text):
            if isinstance(segment, bytes):
                tokens: Sequence[bytes] = [bytes((byte,)) for byte in segment]
            else:
                tokens = self._enc.decode_tokens_bytes(segment)
            for token in tokens:
                offsets.append(chars - 1 if 0x80 <= token[0] < 0xC0 else chars)
                chars += sum(1 for byte in token if not 0x80 <= byte < 0xC0)
        return offsets

    def _segments(self, text: str) -> list[Segment]:
        """The tokens of ``text``: lone surrogates count as U+FFFD (one for one, so offsets
        stay the caller's), long blank runs are cut out when the regex fails on them."""
        try:
            return [self._ids(text)]
        except UnicodeEncodeError:
            return self._segments(_SURROGATE.sub("\ufffd", text))
        except ValueError:
            pattern = hashlib.sha256(self._enc._pat_str.encode()).hexdigest()
            if pattern not in CUTTABLE:
                return [self._encode_or_bytes(text)]
            return cut_blank_runs(
                text,
                self._encode_or_bytes,
                self._piece,
                at_end=CUTTABLE[pattern],
            )

    def _ids(self, text: str) -> list[int]:
        """tiktoken's ids; ``ValueError`` for a lone surrogate or text its regex cannot split.
        ``encode_ordinary`` is faster (no search for special tokens) but panics where the
        regex fails, which text shorter than ``ORDINARY_LIMIT`` cannot make it do."""
        if len(text) < ORDINARY_LIMIT:
            ids: list[int] = self._bpe().encode_ordinary(text)
        else:
            ids = self._bpe().encode(text, _NO_SPECIAL)
        return ids

    def _encode_or_bytes(self, text: str) -> Segment:
        try:
            return self._ids(text)
        except ValueError:
            return text.encode("utf-8")


@define
class EstimateTokenizer:
    """A rough count (``chars_per_token`` characters per token) for models without a tokenizer."""

    chars_per_token: int = field(default=4, validator=validators.gt(0))
    name: str = field(init=False)
    exact: bool = field(default=False, init=False)

    @name.default
    def _name(self) -> str:
        return f"estimate-{self.chars_per_token}cpt"

    def count(self, text: str) -> int:
        """``ceil(len(text) / chars_per_token)``."""
        return math.ceil(len(text) / self.chars_per_token)

    def boundaries(self, text: str) -> list[int]:
        """Every ``chars_per_token``-th character offset."""
        return list(range(0, len(text), self.chars_per_token))


#: Counts memoized per generation (see ``TokenCounter``): about 100 MB at most in all.
GENERATION = 500_000
#: Recurring texts memoized by the string itself (``TokenCounter.count_recurring``).
RECURRING = 64


def _key(text: str) -> bytes:
    """A text's key in ``TokenCounter`` 's memo: its sha256 digest."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class TokenCounter:
    """Memoizes ``tokenizer.count`` by a caller-supplied key or a sha256 digest of the text
    (hardware-accelerated on current CPUs, so hashing costs a fraction of counting), so the
    same content is tokenized once; safe to share between threads.

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
        """Where each token of ``text`` starts (the tokenizer's own answer: not memoized)."""
        return self.tokenizer.boundaries(text)

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

"""The kernel's tokenizers: exact counts for a tiktoken encoding (with the small-text and the
fast exact counters in front of it, and a long text's offsets kept), and a character estimate.

tiktoken is imported only inside functions so that importing lamina stays fast; the encodings
themselves are loaded by ``lamina.encodings``. ``lamina.tokens`` re-exports both tokenizers.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from attrs import define, field, validators

from lamina.blank_runs import CUTTABLE, ORDINARY_LIMIT, Segment, cut_blank_runs
from lamina.encodings import BUILT, ENCODING_HASHES, FastCounter, load_encoding, load_fast
from lamina.offsets import LongTexts, Offsets, offsets_of
from lamina.small_counter import SmallCounter, load_small

if TYPE_CHECKING:
    import tiktoken

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
#: Characters from which a text's token offsets are computed lazily and kept
#: (``TiktokenTokenizer.boundaries``): about 25,000 tokens, more than truncation reads of it.
LONG_TEXT = 100_000
#: Tokens of long texts whose offsets a tokenizer keeps (4 bytes each, plus the text).
LONG_TEXT_TOKENS = 4_000_000
#: Above every token id: a byte charged as one token is kept in ``Offsets`` as this plus it.
_RAW = 1 << 31
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
    # The offsets of the last long texts cut (``boundaries``).
    _long: LongTexts = field(
        factory=lambda: LongTexts(LONG_TEXT_TOKENS), init=False, repr=False, eq=False
    )

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
            return len(self._ids(text))
        except ValueError:  # a lone surrogate, or text the regex cannot split
            return sum(map(len, self._segments(text)))

    def boundaries(self, text: str) -> Sequence[int]:
        """Character offset where each token starts; a token that begins inside a multi-byte
        character gets that character's offset, so cutting there never splits a character.
        A text of ``LONG_TEXT`` characters or more gets ``lamina.offsets.Offsets``, computed
        as asked for and kept for the next request (see ``LONG_TEXT_TOKENS``)."""
        if len(text) >= LONG_TEXT:
            return self._long.get(text, self._offsets)
        tokens: list[bytes] = []
        for segment in self._segments(text):
            if isinstance(segment, bytes):
                tokens.extend(bytes((byte,)) for byte in segment)
            else:
                tokens.extend(self._enc.decode_tokens_bytes(segment))
        return offsets_of(tokens)

    def _offsets(self, text: str) -> Offsets:
        """A long text's lazy offsets; a byte charged as a token (text tiktoken failed on)
        is kept as ``_RAW`` plus the byte."""
        ids: array[int] = array("I")
        raw = False
        for segment in self._segments(text):
            if isinstance(segment, bytes):
                ids.extend(_RAW + byte for byte in segment)
                raw = True
            else:
                ids.extend(segment)
        bpe = self._bpe()
        decode: Callable[[int], bytes] = bpe.decode_single_token_bytes
        if raw:

            def token_bytes(found: int) -> bytes:
                return bytes((found - _RAW,)) if found >= _RAW else decode(found)

            return Offsets(ids, len(text), token_bytes)
        return Offsets(ids, len(text), decode, bpe.decode_bytes)

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

    def boundaries(self, text: str) -> Sequence[int]:
        """Every ``chars_per_token``-th character offset (as a ``range`` for a text of
        ``LONG_TEXT`` characters or more, which costs nothing to make)."""
        offsets = range(0, len(text), self.chars_per_token)
        return offsets if len(text) >= LONG_TEXT else list(offsets)

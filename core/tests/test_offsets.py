"""A long text's token offsets (``lamina.offsets``): the same offsets as the whole list, in
whatever order they are asked for; kept for the next request, so a big tool result or block
cut on every request is tokenized once; at most ``LONG_TEXT_TOKENS`` tokens kept."""

from __future__ import annotations

import random
import threading
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lamina.tokenizers
import lamina.tokens
from lamina import PluginError
from lamina.adapters import CalibratedEstimate
from lamina.checked_tokenizer import CheckedTokenizer
from lamina.offsets import LongTexts, Offsets
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import tool_turn
from lamina.tokens import EstimateTokenizer, TiktokenTokenizer
from lamina.truncation import truncate_middle

#: Text with one-, two-, three- and four-byte characters, blank runs and a lone surrogate.
PIECES = ["word ", "naïve ", "日本語", "🦜", "\n\n", "   ", "\t", "x" * 40, "\ud800", "é"]


@contextmanager
def long_from(chars: int) -> Iterator[None]:
    """Texts of ``chars`` characters or more count as long within."""
    saved = lamina.tokenizers.LONG_TEXT
    lamina.tokenizers.LONG_TEXT = chars
    try:
        yield
    finally:
        lamina.tokenizers.LONG_TEXT = saved


def eager(tok: TiktokenTokenizer, text: str) -> list[int]:
    """The offsets as a short text gets them: the whole list at once."""
    with long_from(len(text) + 1):
        return list(tok.boundaries(text))


@settings(max_examples=60, deadline=None)
@given(
    chosen=st.lists(st.sampled_from(PIECES), max_size=60),
    order=st.randoms(use_true_random=False),
    name=st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_lazy_offsets_are_the_whole_list_in_any_order(
    chosen: list[str], order: random.Random, name: str
) -> None:
    tok = TiktokenTokenizer(name, small_until=None)
    text = "".join(chosen)
    expected = eager(tok, text)
    with long_from(0):
        lazy = tok.boundaries(text)
        assert tok.boundaries(text) is lazy  # kept
    assert isinstance(lazy, Offsets) and len(lazy) == len(expected)
    asked = list(range(len(expected)))
    order.shuffle(asked)
    for i in asked:  # from either end, the middle, again
        assert lazy[i] == expected[i]
        assert lazy[i - len(expected)] == expected[i]
    assert lazy == expected and list(lazy) == expected and lazy[1:4] == expected[1:4]


def test_a_long_text_is_tokenized_once_whoever_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = TiktokenTokenizer("o200k_base")
    calls: list[int] = []
    segments = TiktokenTokenizer._segments

    def counted(self: TiktokenTokenizer, text: str) -> Any:
        calls.append(len(text))
        return segments(self, text)

    monkeypatch.setattr(TiktokenTokenizer, "_segments", counted)
    text = "All work and no play makes Jack a dull boy. " * 20_000
    first = tok.boundaries(text)
    assert first[5] == 20 and first[-1] == len(text) - 1 and calls == [len(text)]
    assert tok.boundaries(text[:-1] + ".") is not first  # another text
    assert tok.boundaries("".join([text])) is first  # an equal string: found by value
    assert calls == [len(text), len(text)]


def test_concurrent_readers_see_the_same_offsets() -> None:
    tok = TiktokenTokenizer("o200k_base")
    text = "naïve café 日本語 🦜 " * 10_000
    expected = eager(tok, text)
    lazy = tok.boundaries(text)
    seen: list[list[int]] = []

    def read(seed: int) -> None:
        rng = random.Random(seed)
        asked = rng.sample(range(len(expected)), 5_000)
        seen.append([lazy[i] for i in asked] + [seed])

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for found in seen:
        rng = random.Random(found[-1])
        assert found[:-1] == [expected[i] for i in rng.sample(range(len(expected)), 5_000)]


@pytest.mark.parametrize("runs", [True, False])
def test_an_offset_is_found_from_the_nearest_known_one(runs: bool) -> None:
    """The middle of a long text: its tokens from the nearer end are decoded in one run (a
    tokenizer that decodes runs) or one by one (raw bytes among the ids), once; an offset
    near a known one decodes only the tokens between."""
    # Token t is two characters: "é!" (three bytes) for odd t, "ab" for even; 100,000 tokens.
    ids = array("I", range(100_000))
    decoded: list[int] = []

    def bytes_of(found: int) -> bytes:
        return "é!".encode() if found % 2 else b"ab"

    def token_bytes(found: int) -> bytes:
        decoded.append(1)
        return bytes_of(found)

    def run_bytes(run: Any) -> bytes:
        decoded.append(len(run))
        return b"".join(map(bytes_of, run))

    lazy = Offsets(ids, 200_000, token_bytes, run_bytes if runs else None)
    assert lazy[50_000] == 100_000
    assert sum(decoded) == 50_001  # the run from the start (or end), then token 50,000 itself
    assert len(decoded) == (2 if runs else 50_001)
    decoded.clear()
    assert lazy[50_010] == 100_020 and lazy[-2] == 199_996 and lazy[50_000] == 100_000
    assert sum(decoded) <= 10 + 2 + 3  # the ten tokens between, one at the end, and each asked
    assert list(lazy[49_999:50_002]) == [99_998, 100_000, 100_002]


def test_the_kept_offsets_are_bounded() -> None:
    kept = LongTexts(tokens=10)
    made: list[str] = []

    def make(text: str) -> Offsets:
        made.append(text)
        return Offsets(array("I", [1] * len(text)), len(text), bytes)

    for text in ("aaaa", "bbbb", "cccc"):
        kept.get(text, make)
    kept.get("bbbb", make)  # the newest again
    kept.get("dddd", make)  # over 10 tokens: the oldest ("aaaa", then "cccc") go
    kept.get("bbbb", make)
    kept.get("aaaa", make)
    assert made == ["aaaa", "bbbb", "cccc", "dddd", "aaaa"]
    huge = LongTexts(tokens=1)
    huge.get("xxxx", make)
    huge.get("xxxx", make)  # one text over the bound is still kept, alone
    assert made[-1] == "xxxx" and made.count("xxxx") == 1


def spy_whole(monkeypatch: pytest.MonkeyPatch, size: int) -> list[str]:
    """What the tokenizer did with texts of ``size`` characters or more: ``"count"`` or
    ``"offsets"`` (tokenized whole either way), one entry per call."""
    whole: list[str] = []
    count, segments = TiktokenTokenizer.count, TiktokenTokenizer._segments

    def counted(self: TiktokenTokenizer, text: str) -> int:
        if len(text) >= size:
            whole.append("count")
        return count(self, text)

    def split(self: TiktokenTokenizer, text: str) -> Any:
        if len(text) >= size:
            whole.append("offsets")
        return segments(self, text)

    monkeypatch.setattr(TiktokenTokenizer, "count", counted)
    monkeypatch.setattr(TiktokenTokenizer, "_segments", split)
    return whole


def test_a_truncated_block_is_not_tokenized_again_on_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = ("a line of notes, the same words again and again\n") * 40_000
    cfg = {
        "model": "gpt-4o",
        "budget": {"max_tokens": 16_000},
        "blocks": [{"id": "notes", "layer": "memory", "text": text}],
    }
    whole = spy_whole(monkeypatch, len(text))
    with make_assembler(cfg) as a:
        first = a.assemble(a.request("first"))
        tokenized = len(whole)
        second = a.assemble(a.request("second, a longer message than the first"))
    assert [b.status for b in first.report.blocks if b.id == "notes"] == ["truncated"]
    assert [b.status for b in second.report.blocks if b.id == "notes"] == ["truncated"]
    assert whole == ["count", "offsets"] and len(whole) == tokenized


def test_a_capped_tool_result_is_not_tokenized_again_on_the_next_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = "line of a long log with a number 12345 in it\n" * 40_000
    blocks = tool_turn(1, "read the log", log)
    whole = spy_whole(monkeypatch, len(log))
    digested: list[int] = []  # the memo's keys made of the whole result (sha256 of 2 MB)
    key = lamina.tokens._key
    monkeypatch.setattr(
        lamina.tokens, "_key", lambda text: digested.append(len(text) >= len(log)) or key(text)
    )
    with make_assembler({"model": "gpt-4o"}, plugins=[("s", StaticProvider(blocks))]) as a:
        first = a.assemble(a.request("what did it say?", max_tokens=16_000))
        tokenized, digests = len(whole), digested.count(True)
        again = a.assemble(a.request("and after that?", max_tokens=16_000))
    capped = [(b.id, b.tokens) for b in first.report.blocks if b.status == "truncated"]
    assert capped == [(b.id, b.tokens) for b in again.report.blocks if b.status == "truncated"]
    assert capped and whole == ["count", "offsets"] and len(whole) == tokenized
    assert digested.count(True) == digests  # its count is found by the block's hash


def test_an_estimate_gives_a_long_text_its_offsets_without_listing_them() -> None:
    tok = EstimateTokenizer(chars_per_token=4)
    text = "0123456789" * 20_000
    offsets = tok.boundaries(text)
    assert isinstance(offsets, range) and list(offsets) == list(range(0, len(text), 4))
    assert tok.boundaries("short text") == [0, 4, 8]
    cut = truncate_middle(text, 1_000, tok)
    assert cut is not None and tok.count(cut) <= 1_000
    assert cut.startswith(text[:1_000]) and cut.endswith(text[-1_000:])
    calibrated = CalibratedEstimate(chars_per_token=4.0)
    assert calibrated.boundaries(text) == range(0, len(text), 4)
    assert calibrated.boundaries("short text") == [0, 4, 8]


def test_a_plugins_offsets_of_a_long_text_are_checked_once() -> None:
    class Words:
        """A plugin's tokenizer: a token per four characters, counting its calls."""

        name, exact = "words", False
        calls = 0

        def count(self, text: str) -> int:
            return -(-len(text) // 4)

        def boundaries(self, text: str) -> list[int]:
            Words.calls += 1
            return list(range(0, len(text), 4)) if "!" not in text else [5, 1]

    checked = CheckedTokenizer(Words(), plugin="words")
    text = "a long log line\n" * 10_000
    first = checked.boundaries(text)
    assert checked.boundaries(text) is first and Words.calls == 1
    assert list(first) == list(range(0, len(text), 4))
    with pytest.raises(PluginError, match="plugin 'words'"):
        checked.boundaries(text + "!")
    with pytest.raises(PluginError):  # a refused answer is not kept
        checked.boundaries(text + "!")

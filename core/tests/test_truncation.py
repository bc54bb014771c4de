"""Truncation on token boundaries: always within the limit, kept parts exact substrings."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.builtins import truncators_plugin
from lamina.records import Tokenizer
from lamina.tokens import EstimateTokenizer, TiktokenTokenizer
from lamina.truncation import (
    END_MARKER,
    MIDDLE_MARKER,
    START_MARKER,
    longest_fitting,
    truncate_end,
    truncate_middle,
    truncate_never,
    truncate_start,
)

Truncate = Callable[[str, int, Tokenizer], str | None]

O200K = TiktokenTokenizer("o200k_base")
CL100K = TiktokenTokenizer("cl100k_base")
STRATEGIES: dict[str, Truncate] = {
    "end": truncate_end,
    "start": truncate_start,
    "middle": truncate_middle,
    "never": truncate_never,
}
PROSE = (
    "The quick brown fox jumps over the lazy dog. Lorem ipsum dolor sit amet, consectetur "
    "adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. "
) * 20
MIXED = "naïve café 日本語のテキスト 🦜 emoji 👨‍👩‍👧‍👦 and ünïcödé, 中文文本 " * 15


def _middle_splits(result: str, text: str) -> list[tuple[str, str]]:
    """Every (head, tail) around a MIDDLE_MARKER in ``result`` that is a prefix and suffix."""
    splits = []
    start = result.find(MIDDLE_MARKER)
    while start != -1:
        head, tail = result[:start], result[start + len(MIDDLE_MARKER) :]
        if text.startswith(head) and text.endswith(tail) and len(head) + len(tail) < len(text):
            splits.append((head, tail))
        start = result.find(MIDDLE_MARKER, start + 1)
    return splits


def _check_shape(kind: str, text: str, result: str) -> None:
    """The kept parts are a non-empty proper prefix / suffix / prefix + suffix of ``text``."""
    if kind == "end":
        assert result.endswith(END_MARKER)
        kept = result[: -len(END_MARKER)]
        assert kept and text.startswith(kept) and len(kept) < len(text)
    elif kind == "start":
        assert result.startswith(START_MARKER)
        kept = result[len(START_MARKER) :]
        assert kept and text.endswith(kept) and len(kept) < len(text)
    else:
        assert kind == "middle"
        assert any(head or tail for head, tail in _middle_splits(result, text))


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(max_size=250),
    max_tokens=st.integers(min_value=-2, max_value=80),
    kind=st.sampled_from(sorted(STRATEGIES)),
)
def test_truncation_properties(text: str, max_tokens: int, kind: str) -> None:
    result = STRATEGIES[kind](text, max_tokens, O200K)
    if O200K.count(text) <= max_tokens:
        assert result == text
        return
    if kind == "never" or result is None:
        return
    assert O200K.count(result) <= max_tokens
    _check_shape(kind, text, result)


def _cuts(text: str) -> list[int]:
    return sorted(set(O200K.boundaries(text)) - {0})


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=120), max_tokens=st.integers(min_value=0, max_value=40))
def test_none_only_when_no_cut_fits(text: str, max_tokens: int) -> None:
    # Brute force over every token boundary: None means no kept part at any cut would fit.
    if O200K.count(text) <= max_tokens:
        return
    if truncate_end(text, max_tokens, O200K) is None:
        assert all(O200K.count(text[:c] + END_MARKER) > max_tokens for c in _cuts(text))
    if truncate_start(text, max_tokens, O200K) is None:
        assert all(O200K.count(START_MARKER + text[c:]) > max_tokens for c in _cuts(text))


@pytest.mark.parametrize("kind", ["end", "start", "middle"])
@pytest.mark.parametrize("tokenizer", [O200K, CL100K], ids=["o200k", "cl100k"])
@pytest.mark.parametrize("text", [PROSE, MIXED], ids=["prose", "mixed"])
@pytest.mark.parametrize("max_tokens", [12, 50, 200])
def test_uses_nearly_all_of_the_budget(
    kind: str, tokenizer: Tokenizer, text: str, max_tokens: int
) -> None:
    result = STRATEGIES[kind](text, max_tokens, tokenizer)
    assert result is not None
    used = tokenizer.count(result)
    assert max_tokens - 4 <= used <= max_tokens
    _check_shape(kind, text, result)


@pytest.mark.parametrize("tokenizer", [O200K, CL100K], ids=["o200k", "cl100k"])
def test_middle_keeps_about_half_each_side(tokenizer: Tokenizer) -> None:
    result = truncate_middle(PROSE, 100, tokenizer)
    assert result is not None
    [(head, tail)] = _middle_splits(result, PROSE)
    assert abs(tokenizer.count(head) - tokenizer.count(tail)) <= 3
    assert tokenizer.count(head) >= 40


def test_end_example_exact() -> None:
    tok = EstimateTokenizer(4)
    text = "abcd" * 10  # 10 tokens
    marker_tokens = tok.count(END_MARKER)  # 14 chars -> 4 tokens
    assert marker_tokens == 4
    assert truncate_end(text, 9, tok) == "abcd" * 5 + END_MARKER  # 20 + 14 chars = 9 tokens
    assert truncate_start(text, 9, tok) == START_MARKER + "abcd" * 5
    assert truncate_end(text, 10, tok) == text
    assert truncate_end(text, 4, tok) is None  # the marker alone uses the budget
    assert truncate_end(text, 5, tok) == "abcd" + END_MARKER


def test_middle_example_exact() -> None:
    tok = EstimateTokenizer(1)
    text = "0123456789" * 3
    assert len(MIDDLE_MARKER) == 17
    # 4 tokens left beside the marker: 2 head + 2 tail
    assert truncate_middle(text, 21, tok) == "01" + MIDDLE_MARKER + "89"
    # 3 left: the head gets the odd token
    assert truncate_middle(text, 20, tok) == "01" + MIDDLE_MARKER + "9"
    assert truncate_middle(text, 18, tok) == "0" + MIDDLE_MARKER
    assert truncate_middle(text, 17, tok) is None


def test_never() -> None:
    assert truncate_never("hello world", 2, O200K) == "hello world"
    assert truncate_never("hello world", 1, O200K) is None


def test_unchanged_when_it_fits() -> None:
    for kind in STRATEGIES:
        assert STRATEGIES[kind]("", 0, O200K) == ""
        assert STRATEGIES[kind](PROSE, O200K.count(PROSE), O200K) == PROSE


def test_single_multi_token_character() -> None:
    # One emoji is three o200k tokens; no non-empty proper prefix exists, so "end" gives up.
    assert truncate_end("🦜", 2, O200K) is None
    result = truncate_end("🦜🦜🦜🦜🦜🦜", 8, O200K)
    assert result is not None
    assert O200K.count(result) <= 8
    _check_shape("end", "🦜🦜🦜🦜🦜🦜", result)


def test_cjk_and_emoji_never_split() -> None:
    for kind in ("end", "start", "middle"):
        for limit in range(8, 60, 7):
            result = STRATEGIES[kind](MIXED, limit, O200K)
            assert result is not None
            result.encode("utf-8")  # no lone surrogates / broken characters
            assert O200K.count(result) <= limit
            _check_shape(kind, MIXED, result)


def test_truncators_plugin_records() -> None:
    records = {r.name: r for r in truncators_plugin.lamina_truncators()}
    assert list(records) == ["never", "start", "middle", "end"]
    assert records["end"].truncate is truncate_end
    assert records["start"].truncate is truncate_start
    assert records["middle"].truncate is truncate_middle
    assert records["never"].truncate is truncate_never
    assert all(r.description for r in records.values())


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 20_000),
    data=st.data(),
    off=st.integers(-5000, 5000),
)
def test_the_longest_fitting_cut_is_found_from_any_guess(
    n: int, data: st.DataObject, off: int
) -> None:
    """``longest_fitting`` finds the largest ``k`` that fits whatever the guess, and from the
    guess a cutter makes (the room left once the fixed parts are counted; the joins may merge
    a token or two) it counts two to four candidates, not the dozen or more a bisection over
    thousands of tokens takes; never more than its guesses and a bisection."""
    # A candidate's tokens as ``k`` grows: one more per kept token, less what the joins merge
    # (0 to 2), and never fewer for more kept.
    base = data.draw(st.integers(0, 50))
    joins = data.draw(st.randoms(use_true_random=False))
    tokens: list[int] = []
    for k in range(n):
        tokens.append(max(tokens[-1] if tokens else 0, base + k - joins.choice((0, 0, 1, 2))))
    limit = data.draw(st.integers(tokens[0] - 3, tokens[-1] + 5))
    fitting = [k for k in range(n) if tokens[k] <= limit]
    tried: list[int] = []

    def tokens_at(k: int) -> int:
        assert 0 <= k < n and k not in tried  # within bounds, and never counted twice
        tried.append(k)
        return tokens[k]

    expected = fitting[-1] if fitting else -1
    assert longest_fitting(tokens_at, limit, fits=-1, fails=n, guess=expected + off) == expected
    assert len(tried) <= 6 + n.bit_length() + 1
    tried.clear()
    assert longest_fitting(tokens_at, limit, fits=-1, fails=n, guess=limit - base) == expected
    assert len(tried) <= 4

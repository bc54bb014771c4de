"""Counting a joined text in pieces (``lamina.joins``, ``TokenCounter.count_joined``): the
sum is tiktoken's count of the whole wherever the rule allows it, for every character of the
Basic Multilingual Plane after a line break and on random texts; and the kernel counts the
event's content once per request, not again inside the current message."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import Message
from lamina.encodings import load_encoding
from lamina.joins import SPLIT_ENCODINGS, splits_between
from lamina.testing import make_assembler
from lamina.tokens import EstimateTokenizer, TiktokenTokenizer, TokenCounter

#: Texts that end a piece in each of the ways a left text can end at a line break.
LEFTS = (
    "x\n",
    "word \n",
    "a.\n",
    "a.\n\n",
    "end:\r\n",
    "  \n",
    "x\t\n",
    "12\n",
    "it's\n",
    "\u3000\n",
    "(\n",
    "a\n \n",
)

#: Characters the random texts are made of: every class the split patterns tell apart.
ALPHABET = st.sampled_from(
    list("aZé日ß0795 \t\r\n\n/.,:;'\"()[]{}<>-_!?#@$%^&*+=|\\`~\u00a0\u2028\u3000\u0301\U0001f99c")
)


def _count(encoding: str, text: str) -> int:
    return len(load_encoding(encoding).encode_ordinary(text))


@pytest.mark.parametrize("encoding", sorted(SPLIT_ENCODINGS))
def test_every_character_after_a_line_break_that_the_rule_allows_splits_there(
    encoding: str,
) -> None:
    splits = splits_between(encoding)
    assert splits is not None
    enc = load_encoding(encoding)
    wrong = []
    for code in range(0x10000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        right = chr(code) + "ab"
        for left in LEFTS:
            if not splits(left, right):
                continue
            joined = len(enc.encode_ordinary(left + right))
            if joined != len(enc.encode_ordinary(left)) + len(enc.encode_ordinary(right)):
                wrong.append((left, hex(code)))
    assert wrong == []


@pytest.mark.parametrize("encoding", sorted(SPLIT_ENCODINGS))
@settings(max_examples=400, deadline=None)
@given(
    left=st.text(ALPHABET, max_size=40),
    right=st.text(ALPHABET, min_size=1, max_size=40),
)
def test_random_joins_the_rule_allows_count_as_their_parts(
    encoding: str, left: str, right: str
) -> None:
    splits = splits_between(encoding)
    assert splits is not None
    left += "\n"
    if splits(left, right):
        assert _count(encoding, left + right) == _count(encoding, left) + _count(encoding, right)


def test_the_rule_refuses_joins_that_merge_tokens() -> None:
    splits = splits_between("o200k_base")
    assert splits is not None
    # A join that may cut a piece in two: the first two count fewer tokens joined.
    for left, right in (("x\n", "\nx"), ("x", "y"), ("a.\n", "/x"), ("x\n", " x")):
        assert not splits(left, right)
    assert _count("o200k_base", "x\n\nx") < _count("o200k_base", "x\n") + _count(
        "o200k_base", "\nx"
    )
    assert splits_between("p50k_base") is None and splits_between(None) is None


@settings(max_examples=200, deadline=None)
@given(
    pieces=st.lists(st.text(ALPHABET, max_size=30), min_size=0, max_size=5),
    separator=st.sampled_from(["\n\n", "\n", " ", "", "\n---\n"]),
)
def test_count_joined_is_the_count_of_the_joined_text(pieces: list[str], separator: str) -> None:
    counter = TokenCounter(TiktokenTokenizer("o200k_base"))
    joined = separator.join(pieces)
    assert counter.count_joined(pieces, separator) == _count("o200k_base", joined)


def test_a_tokenizer_without_a_known_split_counts_the_joined_text_whole() -> None:
    counted: list[str] = []

    class Spy(EstimateTokenizer):
        def count(self, text: str) -> int:
            counted.append(text)
            return super().count(text)

    counter = TokenCounter(Spy())
    counter.count_joined(["Current time: now", "Review this."], "\n\n")
    assert counted == ["Current time: now\n\nReview this."]


def test_the_event_content_is_tokenized_once_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The current message joins the event's time lines and its content; its exact count
    reuses the content's count from measuring (without ``count_joined`` the content is
    tokenized a second time, inside the joined text)."""
    counted: list[str] = []
    real = TiktokenTokenizer.count

    def spy(self: TiktokenTokenizer, text: str) -> int:
        counted.append(text)
        return real(self, text)

    monkeypatch.setattr(TiktokenTokenizer, "count", spy)
    a = make_assembler({"model": "gpt-4o"})
    content = "Review this change and tell me what to fix. " * 20
    request = a.request(content, history=[Message.of("user", "hi")])
    ctx = a.assemble(request)
    assert sum(content in text for text in counted) == 1
    # And the usage it reports is the exact count of what is sent.
    sent = ctx.current_message.text
    overhead = a.model("gpt-4o").info
    assert ctx.token_budget.used.event == (
        _count("o200k_base", sent) + overhead.message_overhead + overhead.reply_overhead
    )


def test_a_join_reaching_the_ordinary_limit_is_counted_whole() -> None:
    """Past ``ORDINARY_LIMIT`` a tokenizer counts another way, which the rule does not cover."""
    import lamina.tokens

    splits = splits_between("o200k_base")
    assert splits is not None
    assert not splits("x\n", "y" * lamina.tokens.ORDINARY_LIMIT)

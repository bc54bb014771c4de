"""A tokenizer plugin's bad answers (negative or non-integer counts, boundaries that are not
non-decreasing offsets inside the text, exceptions) are errors naming the plugin."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from lamina import PluginError, hookimpl
from lamina.testing import FakeModel, FakeTokenizer, make_assembler
from lamina.tokens import CheckedTokenizer, TokenCounter
from lamina.truncation import truncate_end


class Scripted:
    """A tokenizer whose ``count`` and ``boundaries`` return what the test says."""

    name = "scripted"
    exact = True
    revision = 7

    def __init__(self, count: object = 3, bounds: object = (0, 1, 2)) -> None:
        self._count, self._bounds = count, bounds

    def count(self, text: str) -> object:
        if isinstance(self._count, Exception):
            raise self._count
        return self._count

    def boundaries(self, text: str) -> object:
        if isinstance(self._bounds, Exception):
            raise self._bounds
        return self._bounds


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (-1, "returned -1"),
        (2.5, "returned 2.5"),
        (True, "returned True"),
        ("3", "returned '3'"),
        (None, "returned None"),
        (ZeroDivisionError("boom"), "raised ZeroDivisionError in count(): boom"),
    ],
)
def test_a_bad_count_names_the_plugin(value: object, words: str) -> None:
    counter = TokenCounter(Scripted(count=value), plugin="acme-tokens")
    with pytest.raises(PluginError, match=re.escape(words)) as caught:
        counter.count("some text")
    assert caught.value.plugin == "acme-tokens"
    assert "plugin 'acme-tokens'" in str(caught.value) and "'scripted'" in str(caught.value)
    assert counter.misses == 0  # nothing bad was memoized


def test_a_good_count_is_memoized_and_integers_stay_integers() -> None:
    class IntLike(int):
        pass

    counter = TokenCounter(Scripted(count=IntLike(4)), plugin="acme-tokens")
    assert counter.count("x") == 4 and type(counter.count("x")) is int
    assert (counter.hits, counter.misses) == (1, 1)


@pytest.mark.parametrize(
    ("bounds", "words"),
    [
        ([0, 2, 1], "gave 1 after 2"),
        ([0, 1, 9], "gave 9 after 1 for a text of 3 characters"),
        ([-1, 0, 1], "gave -1 after 0"),
        ([0, 1.5, 2], "gave 1.5"),
        (None, "raised TypeError in boundaries()"),
        (RuntimeError("nope"), "raised RuntimeError in boundaries(): nope"),
    ],
)
def test_bad_boundaries_name_the_plugin(bounds: object, words: str) -> None:
    checked = TokenCounter(Scripted(bounds=bounds), plugin="acme-tokens").checked
    with pytest.raises(PluginError, match=re.escape(words)) as caught:
        checked.boundaries("abc")
    assert caught.value.plugin == "acme-tokens"


def test_repeated_offsets_are_fine_and_the_checked_tokenizer_stands_in() -> None:
    tok = Scripted(count=3, bounds=[0, 0, 2])
    checked = CheckedTokenizer(tok, "acme-tokens")
    assert checked.boundaries("abc") == [0, 0, 2]
    assert (checked.name, checked.exact, checked.revision) == ("scripted", True, 7)
    fake = CheckedTokenizer(FakeTokenizer(), "fake")
    text = "Hello, world! " * 20
    cut = truncate_end(text, 12, fake)
    assert cut is not None and FakeTokenizer().count(cut) <= 12


def test_truncation_through_the_checked_tokenizer_refuses_bad_boundaries() -> None:
    class Backwards(FakeTokenizer):
        def boundaries(self, text: str) -> Sequence[int]:
            return list(reversed(super().boundaries(text)))

    checked = TokenCounter(Backwards(), plugin="acme-tokens").checked
    with pytest.raises(PluginError, match="acme-tokens"):
        truncate_end("Hello, world! " * 20, 12, checked)


class NegativeModel(FakeModel):
    """``FakeModel`` whose tokenizer counts every text as -5 tokens."""

    @hookimpl
    def lamina_tokenizer(self, model: str) -> Scripted | None:
        return Scripted(count=-5) if model == self.model else None


def test_the_kernel_refuses_a_negative_count() -> None:
    assembler = make_assembler(
        {"model": "fake-model", "blocks": [{"id": "b", "text": "hello"}]},
        plugins=[("negative-tokens", NegativeModel())],
    )
    with pytest.raises(PluginError, match="count\\(\\) returned -5"):
        assembler.assemble(assembler.request("hi"))


def test_the_kernel_names_the_tokenizer_plugin() -> None:
    assembler = make_assembler(
        {"model": "fake-model", "blocks": [{"id": "b", "text": "hello"}]},
        plugins=[("negative-tokens", NegativeModel())],
    )
    with pytest.raises(PluginError) as caught:
        assembler.assemble(assembler.request("hi"))
    assert caught.value.plugin == "negative-tokens"

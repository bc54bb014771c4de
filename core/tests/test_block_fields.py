"""A block's and a budget's fields are checked as they are made: counts are never negative,
and a title or tag is cleaned of characters that could break out of its place."""

from __future__ import annotations

import pytest

from lamina import Block
from lamina.model.budget import BudgetUsage
from lamina.model.text import clean


@pytest.mark.parametrize("name", ["min_tokens", "max_tokens", "token_count"])
def test_a_negative_count_is_refused_naming_its_field(name: str) -> None:
    with pytest.raises(ValueError, match=f"'{name}' must be >= 0: -1"):
        Block.text("b", "session", "x", **{name: -1})


def test_optional_counts_may_be_left_out() -> None:
    block = Block.text("b", "session", "x", max_tokens=None, token_count=None)
    assert (block.min_tokens, block.max_tokens, block.token_count) == (0, None, None)


def test_titles_and_tags_are_cleaned() -> None:
    hostile = "a\x00b\ud800c\x1b[31m"
    block = Block.text("b", "session", "x", title=hostile, tag=hostile)
    assert block.title == block.tag == clean(hostile)
    assert Block.text("b", "session", "x").title is None


def test_a_negative_budget_figure_is_refused() -> None:
    with pytest.raises(ValueError, match="'history' must be >= 0: -2"):
        BudgetUsage(history=-2, total=-2)

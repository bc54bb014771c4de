"""Counts in messages read as words do: one block, two blocks (report, text view, errors)."""

from __future__ import annotations

import pytest

from lamina import Block, BudgetError, counted, plural
from lamina.reporting import render_text, report_document
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import turn


def test_counted_and_plural() -> None:
    assert [counted(n, "block") for n in (0, 1, 2)] == ["0 blocks", "1 block", "2 blocks"]
    assert plural(2, "reply", "replies") == "replies" and plural(1, "reply", "replies") == "reply"


def test_one_dropped_block_and_one_message_read_in_the_singular() -> None:
    blocks = [
        Block.text("keep", "memory", "short note", priority=0.9),
        Block.text("drop", "memory", "word " * 400, priority=0.1, truncation="never"),
        *turn(1, "hello", "hi"),
    ]
    a = make_assembler(
        {"model": "gpt-4o", "budget": {"max_tokens": 200, "reserve_response": 0}},
        plugins=[("fixture", StaticProvider(blocks))],
    )
    ctx = a.assemble(a.request("q"))
    warnings = report_document(ctx)["assembly_report"]["warnings"]
    assert "1 block excluded" in warnings
    assert "=== history (2 messages) ===" in render_text(ctx)
    one = make_assembler({"model": "gpt-4o"}, plugins=[("fixture", StaticProvider([]))])
    assert "=== history (0 messages) ===" in render_text(one.assemble(one.request("q")))


def test_the_budget_error_says_the_last_turn() -> None:
    blocks = list(turn(1, "word " * 300, "ok"))
    a = make_assembler(
        {
            "model": "gpt-4o",
            "budget": {"max_tokens": 100, "reserve_response": 0, "reserve_tools": 0},
            "fit": {"minimum_recent": 1},
        },
        plugins=[("fixture", StaticProvider(blocks))],
    )
    with pytest.raises(BudgetError, match=r"the last 1 turn\)"):
        a.assemble(a.request("q"))

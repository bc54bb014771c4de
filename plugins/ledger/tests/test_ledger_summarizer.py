"""The extractive summarizer keeps the goal, decisions, open asks and exact identifiers,
stays within its token limit, and folds the previous summary in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from lamina_ledger.summarizer import SUMMARY_KEY, summarize

from lamina import Block, Message, Provenance, ToolCallPart, ToolResultPart
from lamina.testing import make_assembler

TOK = make_assembler({"model": "gpt-4o"}).model("gpt-4o").tokenizer


def block(i: int, m: Message) -> Block:
    return Block(id=f"b{i}", layer="session", content=m.content, role=m.role)


CONVERSATION = [
    Message.of("user", "Migrate the billing service to Postgres 16. Keep the API stable."),
    Message(
        role="assistant",
        content=(ToolCallPart(id="c1", name="read", arguments={"path": "billing/models.py"}),),
    ),
    Message(
        role="tool",
        content=(
            ToolResultPart(call_id="c1", content="class Invoice: ...  # see billing/db/schema.sql"),
        ),
    ),
    Message.of(
        "assistant", "We decided to keep the invoice ids as UUIDs. The migration takes 42 minutes."
    ),
    Message.of("user", "Can you also check the cron job in ops/cron.yaml?"),
]


def test_keeps_goal_decisions_asks_and_identifiers() -> None:
    text = summarize([block(i, m) for i, m in enumerate(CONVERSATION)], 400, TOK)
    expected_lines = [
        "Goal: Migrate the billing service to Postgres 16.",
        "- We decided to keep the invoice ids as UUIDs.",
        "- Can you also check the cron job in ops/cron.yaml?",
    ]
    for line in expected_lines:
        assert line in text.splitlines()
    for ident in ("billing/models.py", "billing/db/schema.sql", "ops/cron.yaml", "42", "16"):
        assert ident in text
    assert "read(path='billing/models.py')" in text


def test_deterministic_and_within_the_limit() -> None:
    blocks = [block(i, m) for i, m in enumerate(CONVERSATION * 20)]
    a = summarize(blocks, 60, TOK)
    assert a == summarize(blocks, 60, TOK)
    assert 0 < TOK.count(a) <= 60
    assert a.startswith("Goal: Migrate the billing service")


def test_folds_in_the_previous_summary() -> None:
    previous = Block.text(
        "prev",
        "session",
        "[Previous conversation summary]\nGoal: Ship v2\nDecisions:\n- Use SQLite WAL.\nIdentifiers:\n- docs/plan.md",
        provenance=Provenance(metadata={SUMMARY_KEY: True}),
    )
    text = summarize(
        [previous, block(1, Message.of("user", "Now fix tests/test_api.py please"))], 300, TOK
    )
    assert text.splitlines()[0] == "Goal: Ship v2"
    assert "- Use SQLite WAL." in text and "docs/plan.md" in text and "tests/test_api.py" in text


@given(
    st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=12),
    st.integers(min_value=1, max_value=200),
)
def test_never_exceeds_max_tokens(texts: list[str], limit: int) -> None:
    blocks = [
        block(i, Message.of("user" if i % 2 == 0 else "assistant", t)) for i, t in enumerate(texts)
    ]
    assert TOK.count(summarize(blocks, limit, TOK)) <= limit

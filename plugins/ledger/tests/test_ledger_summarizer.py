"""The extractive summarizer keeps the goal, decisions, open asks and exact identifiers,
stays within its token limit, and folds the previous summary in. The goal is the user's first
ask (never the event preamble the kernel sends before it); decisions are the assistant's prose
(never tool output)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lamina_ledger import summarizer
from lamina_ledger.summarizer import SUMMARY_KEY, identifiers, summarize

from lamina import Block, Message, Provenance, ToolCallPart, ToolResultPart
from lamina.testing import StaticProvider, make_assembler

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
        "Goal: Migrate the billing service to Postgres 16. Keep the API stable.",
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


def test_an_item_seen_again_counts_as_the_newest_and_is_listed_once() -> None:
    said = [f"Look at pkg/mod{i}.py" for i in range(30)] + ["Look at pkg/mod0.py"]
    text = summarize([block(i, Message.of("user", t)) for i, t in enumerate(said)], 60, TOK)
    lines = text.splitlines()
    idents = lines[lines.index("Identifiers:") + 1]
    assert idents.count("pkg/mod0.py") == 1
    assert idents.endswith(", pkg/mod0.py")  # the newest last, and kept when few fit
    assert "pkg/mod1.py" not in idents


@given(
    st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=12),
    st.integers(min_value=1, max_value=200),
)
def test_never_exceeds_max_tokens(texts: list[str], limit: int) -> None:
    blocks = [
        block(i, Message.of("user" if i % 2 == 0 else "assistant", t)) for i, t in enumerate(texts)
    ]
    assert TOK.count(summarize(blocks, limit, TOK)) <= limit


# -- regressions: the goal is the user's first ask, decisions are the assistant's prose ----


def sent_message(text: str) -> Message:
    """``text`` as the kernel sends it: memory placed before the event, the event preamble
    (time, timezone, channel, platform, actions, hook data), then the content."""
    memory = StaticProvider([Block.text("m1", "memory", "We decided to use tabs in 2019.")])
    a = make_assembler({"model": "gpt-4o", "role": "manager"}, plugins=[("mem", memory)])
    request = a.request(
        text,
        platform="slack",
        channel="#dev",
        platform_actions=("react",),
        hook_data={"ci": {"status": "red", "run": 4411}},
    )
    sent = a.assemble(request).current_message
    assert sent.text.index("Current time: 2026-01-02T03:04:05") < sent.text.index(text)
    return sent


def test_the_goal_is_the_first_ask_never_the_event_preamble_or_context() -> None:
    blocks = [
        block(0, sent_message("Port the CLI to click. Keep every flag working.")),
        block(1, Message.of("assistant", "I'll switch the parser to click.group.")),
        block(2, sent_message("Can you also add tests/test_cli.py?")),
    ]
    text = summarize(blocks, 400, TOK)
    assert text.splitlines()[0] == "Goal: Port the CLI to click. Keep every flag working."
    assert "- Can you also add tests/test_cli.py?" in text.splitlines()
    for preamble in ("Current time", "Timezone", "2026-01-02", "slack", "#dev", "4411", "tabs"):
        assert preamble not in text, preamble


def test_a_greeting_is_not_the_goal() -> None:
    blocks = [
        block(0, Message.of("user", "Hi there!")),
        block(1, Message.of("assistant", "Hello! How can I help?")),
        block(2, Message.of("user", "Please fix the flaky test in tests/test_api.py.")),
    ]
    assert summarize(blocks, 200, TOK).startswith(
        "Goal: Please fix the flaky test in tests/test_api.py."
    )


def test_decisions_come_from_the_assistants_prose_not_tool_output() -> None:
    output = "We decided to drop the users table.\nYou should rotate the key.\nsee db/migrate.sql"
    blocks = [
        block(0, Message.of("user", "Clean up the database layer.")),
        block(
            1,
            Message(
                role="assistant",
                content=(ToolCallPart(id="c1", name="run", arguments={"cmd": "make db"}),),
            ),
        ),
        block(2, Message(role="tool", content=(ToolResultPart(call_id="c1", content=output),))),
        block(
            3,
            Message(
                role="tool",
                content=(
                    ToolResultPart(call_id="c1", content="Error: we must restart", is_error=True),
                ),
            ),
        ),
        block(
            4,
            Message.of(
                "assistant",
                "The log says:\n```\nwe will use the fallback pool\n```\n"
                "    must retry: 3 attempts\n"
                "$ make db --keep\n"
                "I decided to keep the connection pool and switch the migrations to Alembic.",
            ),
        ),
    ]
    text = summarize(blocks, 400, TOK)
    decisions = text.split("Decisions:\n", 1)[1].split("\n", 1)
    assert decisions[0] == (
        "- I decided to keep the connection pool and switch the migrations to Alembic."
    )
    for leaked in (
        "users table",
        "rotate the key",
        "tool error",
        "restart",
        "fallback pool",
        "retry",
    ):
        assert leaked not in text, leaked
    assert "db/migrate.sql" in text  # identifiers still come from tool output


def test_a_compacted_session_recorded_as_sent_keeps_the_users_goal(tmp_path: Path) -> None:
    from lamina_ledger import plugin as ledger_plugin
    from lamina_ledger.session import LedgerSession

    config = {
        "model": "gpt-4o",
        "session": "s",
        "plugins": {"ledger": {"database": str(tmp_path / "l.db"), "minimum_turns": 1}},
    }
    a = make_assembler(config, plugins=[("ledger", ledger_plugin)])
    asks = ["Rename the package to lamina_core. Update every import.", "Run the tests now."]
    with a, LedgerSession(a) as s:
        s.start("s")
        for i, ask in enumerate([*asks, "Thanks, what is left?", "Check docs/index.md."]):
            ctx = s.assemble(a.request(ask))
            reply = Message.of("assistant", f"We will keep the old name as an alias ({i}).")
            s.record_turn(ctx, [ctx.current_message, reply])
        assert s.compact(a.request("next"), share=0.1) is not None
        compaction = s.ledger.history("s").compaction
    assert compaction is not None
    assert compaction.summary.splitlines()[0] == f"Goal: {asks[0]}"
    assert "Current time" not in compaction.summary and "Timezone" not in compaction.summary


# -- identifiers: searched for on the lines that can hold them ------------------------------


def _identifiers_everywhere(text: str, *, numbers: bool) -> list[str]:
    """``identifiers`` as first written: every pattern over the whole text."""
    found: list[tuple[int, str]] = []
    for rx in (summarizer._URL, summarizer._SLASHED, summarizer._PATH):
        found += [(m.start(), m.group(0).rstrip(".,;:")) for m in rx.finditer(text)]
    found += [(m.start(1), m.group(1)) for m in summarizer._TICKED.finditer(text)]
    if numbers:
        found += [(m.start(), m.group(0).rstrip(",")) for m in summarizer._NUMBER.finditer(text)]
    out: list[str] = []
    for _, ident in sorted(found):
        if ident.lower() in summarizer._NOT_EXT or (len(ident) < 2 and not ident.isdigit()):
            continue
        if ident not in out and not any(ident in o for o in out if "/" in o):
            out.append(ident)
    return out


_PIECES = st.sampled_from(
    ["a", "Zz", "é", "_", "-", ".", "..", "/", ":", "\n", " ", "\t", "`", ",", "%", "7", "42",
     "ms", "x", "py", "src/", "./", "https://h.io/p", "e.g", ")", "\r", " " * 90, "ab" * 40]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join), st.booleans())
def test_identifiers_searched_line_by_line_are_those_of_the_whole_text(
    text: str, numbers: bool
) -> None:
    """Lines longer than ``_MAX_RUN`` (searched run by run) included."""
    assume(all(len(run) <= summarizer._MAX_RUN for run in summarizer._RUN.findall(text)))
    assert identifiers(text, numbers=numbers) == _identifiers_everywhere(text, numbers=numbers)


@pytest.mark.timeout(60)
def test_a_megabyte_of_path_characters_is_searched_in_linear_time() -> None:
    """The path patterns try again from each point of a run of path characters (a run
    costs the square of its length): a run longer than ``_MAX_RUN`` gives no identifier, the
    others on its line and the runs of shorter lines still do. (Minutes before the bound.)"""
    hostile = "a." * 500_000 + "/x.py src/app.py " + "a.a/" * 300
    assert identifiers(hostile, numbers=True) == ["src/app.py"]
    lines = ("a." * 126 + "a/\n") * 4_000
    assert identifiers(lines, numbers=False) == _identifiers_everywhere(lines[:300], numbers=False)


def test_identifiers_in_source_code_are_those_of_the_whole_text() -> None:
    """Python's own modules (code, docstrings, paths, numbers), as tool results show them."""
    import inspect
    import json
    import os.path
    import pathlib
    import tarfile

    for module in (inspect, json.decoder, os.path, pathlib, tarfile):
        source = Path(module.__file__ or "").read_text(encoding="utf-8")
        for at in range(0, len(source), 4000):
            head = source[at : at + 4000]
            for numbers in (True, False):
                want = _identifiers_everywhere(head, numbers=numbers)
                assert identifiers(head, numbers=numbers) == want

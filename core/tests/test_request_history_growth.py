"""A host passes its whole history with every request: the blocks made for a session's last
history are reused when the next one starts with it (only the new messages are made into
blocks), and what comes out is always what making the whole history afresh gives."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lamina.builtins.history_plugin as history_plugin
from lamina import Assembler, Block, Message, TextPart, ToolCallPart, ToolResultPart
from lamina.model.budget import TokenBudget
from lamina.records import ProviderContext
from lamina.testing import make_assembler

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def _context(a: Assembler, history: Sequence[Message], session: str = "s") -> ProviderContext:
    model = a.model("gpt-4o")
    return ProviderContext(
        request=a.request("next", history=tuple(history), session_label=session),
        config=a.config,
        settings=None,
        budget=TokenBudget.plan(model_limit=128_000, reserve_response=0, reserve_tools=0),
        tokenizer=model.tokenizer,
        now=NOW,
        plugin=history_plugin.NAME,
    )


def _provided(
    a: Assembler, history: Sequence[Message], session: str = "s"
) -> tuple[tuple[Block, ...], list[str]]:
    ctx = _context(a, history, session)
    return tuple(history_plugin.provide(ctx)), ctx.warnings


def _afresh(a: Assembler, history: Sequence[Message]) -> tuple[tuple[Block, ...], list[str]]:
    """What the provider gives for ``history`` with nothing remembered."""
    kept = history_plugin._made
    history_plugin._made = OrderedDict()
    try:
        return _provided(a, history, "afresh")
    finally:
        history_plugin._made = kept


def _call(n: int) -> Message:
    return Message(
        role="assistant", content=(ToolCallPart(id=f"c{n}", name="read", arguments={"n": n}),)
    )


def _result(n: int) -> Message:
    return Message(role="tool", content=(ToolResultPart(call_id=f"c{n}", content=f"r{n}"),))


@pytest.fixture(autouse=True)
def _nothing_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_plugin, "_made", OrderedDict())


def test_a_grown_history_makes_blocks_for_its_new_messages_only() -> None:
    a = make_assembler()
    history = [Message.of("user", "q0"), _call(0), _result(0), Message.of("assistant", "a0")]
    first, _ = _provided(a, history)
    history += [Message.of("user", "q1"), Message.of("assistant", "a1")]
    second, _ = _provided(a, history)
    assert len(second) == len(first) + 2
    assert all(old is new for old, new in zip(first, second, strict=False))  # the same blocks
    again, _ = _provided(a, history)
    assert all(old is new for old, new in zip(second, again, strict=True))
    assert (second, []) == _afresh(a, history)


def test_a_call_left_out_for_want_of_a_result_is_kept_once_the_result_comes() -> None:
    a = make_assembler()
    history = [Message.of("user", "q0"), _call(0)]
    blocks, warnings = _provided(a, history)
    assert len(blocks) == 1 and "tool call 'c0' has no result" in warnings[0]
    history += [_result(0), Message.of("assistant", "a0")]
    blocks, warnings = _provided(a, history)
    assert (blocks, warnings) == _afresh(a, history)
    assert len(blocks) == 4 and warnings == []


def test_each_session_keeps_its_own_history() -> None:
    a = make_assembler()
    one = [Message.of("user", "first session")]
    two = [Message.of("user", "second session"), Message.of("assistant", "hello")]
    _provided(a, one, "one")
    _provided(a, two, "two")
    assert _provided(a, one, "one") == _afresh(a, one)
    assert _provided(a, two, "two") == _afresh(a, two)


MESSAGES = st.one_of(
    st.integers(0, 3).map(lambda n: Message.of("user", f"question {n}")),
    st.integers(0, 3).map(lambda n: Message.of("assistant", f"answer {n}")),
    st.integers(0, 3).map(_call),
    st.integers(0, 3).map(_result),
    st.just(Message.of("system", "Be brief.")),
    st.just(
        Message(
            role="user", content=(TextPart(text="look"), ToolResultPart(call_id="c1", content="x"))
        )
    ),
)
STEPS = st.lists(
    st.one_of(
        st.lists(MESSAGES, min_size=1, max_size=4).map(lambda m: ("append", m)),
        st.integers(1, 3).map(lambda k: ("drop", k)),
        st.tuples(st.integers(0, 20), MESSAGES).map(lambda e: ("edit", e)),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_whatever_the_host_passes_the_blocks_are_what_making_it_afresh_gives(
    steps: list[tuple[str, object]],
) -> None:
    history_plugin._made = OrderedDict()
    a = make_assembler()
    history: list[Message] = []
    for kind, arg in steps:
        if kind == "append":
            assert isinstance(arg, list)
            history += arg
        elif kind == "drop":
            assert isinstance(arg, int)
            history = history[:-arg]
        elif history:
            assert isinstance(arg, tuple)
            index, message = arg
            history[index % len(history)] = message
        if history:
            assert _provided(a, history) == _afresh(a, history)

"""JSON round trips of the data model, and errors that name the path."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lamina
from lamina import (
    Event,
    ImagePart,
    Message,
    SerdeError,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from lamina.serde import from_json, to_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
parts = st.one_of(
    st.builds(TextPart, text=st.text()),
    st.builds(ImagePart, media_type=st.just("image/png"), data=st.text(min_size=1, max_size=30)),
    st.builds(
        ToolCallPart,
        id=st.text(min_size=1, max_size=10),
        name=st.text(min_size=1, max_size=10),
        arguments=st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    ),
    st.builds(
        ToolResultPart,
        call_id=st.text(min_size=1, max_size=10),
        content=st.text(),
        is_error=st.booleans(),
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(parts, max_size=4).map(tuple),
    context_json=st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3),
)


@given(messages)
def test_messages_round_trip_without_loss(message):
    assert from_json(to_json(message), Message) == message


def test_event_round_trips_with_its_time():
    event = Event(
        content="hi",
        time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        hook_data={"a": [1]},
        platform_actions=("react",),
        attachments=(ImagePart(media_type="image/png", url="u"),),
    )
    assert from_json(to_json(event), Event) == event


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '{"role": "user", "content": [{"type": "text", "text": "x", "zzz": 1}]}',
            "unknown keys ['zzz'] @ $.content[0]",
        ),
        (
            '{"role": "user", "content": [{"type": "video"}]}',
            "unknown part type 'video'; expected one of image, text, tool_call, tool_result @ $.content[0]",
        ),
        ('{"role": "user", "content": [{"text": "x"}]}', "unknown part type None"),
        ('{"role": "boss", "content": []}', "@ $.role"),
        ('{"role": "user", "content": "hello"}', "expected a list, got str 'hello' @ $.content"),
        ('{"role": "user"}', "required field missing @ $.content"),
        ("not json", "not JSON"),
    ],
)
def test_errors_name_the_path(text, expected):
    with pytest.raises(SerdeError) as info:
        from_json(text, Message)
    assert expected in str(info.value)


def test_budget_invariants_are_enforced():
    with pytest.raises(ValueError, match="exceeds model limit"):
        lamina.TokenBudget(model_limit=100, reserve_response=50, available=60)
    with pytest.raises(ValueError, match="sum of its layers"):
        lamina.BudgetUsage(system_prompt=1, history=1, event=1, total=4)
    budget = lamina.TokenBudget.plan(model_limit=100, reserve_response=10, reserve_tools=20, cap=50)
    assert (budget.available, budget.remaining) == (50, 50)

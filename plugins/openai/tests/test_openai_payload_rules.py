"""What the OpenAI adapters refuse to send (tool names outside OpenAI's rule) and what they
wrap (tool-call arguments that are not JSON objects)."""

from __future__ import annotations

import json

import pytest
from lamina_openai import plugin

from lamina import ConfigError, Message, Tool, ToolCallPart, ToolResultPart
from lamina.adapters import PayloadError
from lamina.testing.adapters import make_context

ADAPTERS = {a.name: a for a in plugin.lamina_adapters(settings=None)}
RULE = "^[a-zA-Z0-9_-]{1,64}$"


def _answered(call: ToolCallPart) -> tuple[Message, ...]:
    return (
        Message.of("user", "Go."),
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(ToolResultPart(call_id=call.id, content="done"),)),
    )


@pytest.mark.parametrize("name", ["openai", "openai-responses"])
def test_a_tool_name_outside_the_rule_is_an_error_naming_tool_and_rule(name: str) -> None:
    context = make_context(model="gpt-4o", provider="openai", tools=(Tool(name="web search"),))
    with pytest.raises(PayloadError) as caught:
        ADAPTERS[name].build_request(context, {})
    message = str(caught.value)
    assert "'web search'" in message and RULE in message and "tools[0].name" in message
    assert f"adapter {name!r}" in message and isinstance(caught.value, ConfigError)


@pytest.mark.parametrize("name", ["openai", "openai-responses"])
def test_a_recorded_call_outside_the_rule_is_an_error_naming_the_call(name: str) -> None:
    history = _answered(ToolCallPart(id="call_9", name="x" * 65))
    context = make_context(model="gpt-4o", provider="openai", history=history)
    with pytest.raises(PayloadError, match=r"tool call 'call_9'.*'x{65}'"):
        ADAPTERS[name].build_request(context, {})


def test_an_unanswered_call_with_a_bad_name_stays_a_note() -> None:
    """A call with no result is sent as text, so its name breaks no rule."""
    history = (Message(role="assistant", content=(ToolCallPart(id="c", name="bad name"),)),)
    context = make_context(model="gpt-4o", provider="openai", history=history)
    payload = ADAPTERS["openai"].build_request(context, {})
    assert "[tool call bad name (id c)" in payload["messages"][1]["content"]


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ({"path": "a"}, '{"path":"a"}'),
        ('{"path": "a"}', '{"path":"a"}'),
        ("free text", '{"value":"free text"}'),
        ([1, 2], '{"value":[1,2]}'),
        (3, '{"value":3}'),
        (None, "{}"),
    ],
)
def test_arguments_are_sent_as_a_json_object(arguments: object, sent: str) -> None:
    call = ToolCallPart(id="c1", name="read_file", arguments=arguments)  # type: ignore[arg-type]
    context = make_context(model="gpt-4o", provider="openai", history=_answered(call))
    chat = ADAPTERS["openai"].build_request(context, {})
    assert chat["messages"][2]["tool_calls"][0]["function"]["arguments"] == sent
    items = ADAPTERS["openai-responses"].build_request(context, {})["input"]
    assert [i["arguments"] for i in items if i.get("type") == "function_call"] == [sent]
    assert isinstance(json.loads(sent), dict)

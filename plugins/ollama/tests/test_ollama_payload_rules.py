"""Ollama documents no rule for tool names, so they go as given; tool-call arguments that are
not JSON objects are wrapped like every adapter's."""

from __future__ import annotations

import pytest
from lamina_ollama import plugin

from lamina import Message, Tool, ToolCallPart, ToolResultPart
from lamina.testing.adapters import make_context

ADAPTER = plugin.lamina_adapters(settings=None)[0]


def test_tool_names_go_as_given() -> None:
    context = make_context(model="llama3.2:3b", provider="ollama", tools=(Tool(name="web search"),))
    assert ADAPTER.build_request(context, {})["tools"][0]["function"]["name"] == "web search"


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [("free text", {"value": "free text"}), ('{"q": 1}', {"q": 1}), ([1], {"value": [1]})],
)
def test_arguments_are_sent_as_an_object(arguments: object, sent: dict) -> None:
    call = ToolCallPart(id="c1", name="read_file", arguments=arguments)  # type: ignore[arg-type]
    history = (
        Message.of("user", "Go."),
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(ToolResultPart(call_id="c1", content="done"),)),
    )
    context = make_context(model="llama3.2:3b", provider="ollama", history=history)
    message = ADAPTER.build_request(context, {})["messages"][2]
    assert message["tool_calls"] == [{"function": {"name": "read_file", "arguments": sent}}]

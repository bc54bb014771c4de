"""What the Anthropic adapter refuses to send (tool names and ``tool_use`` ids outside
Anthropic's rules) and what it wraps (tool-call arguments that are not JSON objects)."""

from __future__ import annotations

import pytest
from lamina_anthropic import plugin

from lamina import ConfigError, Message, Tool, ToolCallPart, ToolResultPart
from lamina.adapters import PayloadError
from lamina.testing.adapters import make_context

ADAPTER = plugin.lamina_adapters(settings=None)[0]


def _answered(call: ToolCallPart) -> tuple[Message, ...]:
    return (
        Message.of("user", "Go."),
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(ToolResultPart(call_id=call.id, content="done"),)),
    )


def _build(**kwargs: object) -> dict:
    return ADAPTER.build_request(
        make_context(model="claude-sonnet-4", provider="anthropic", **kwargs), {}
    )


@pytest.mark.parametrize("bad_id", ["call.1", "functions.read_file:0", "id with space", "ü"])
def test_a_tool_use_id_outside_the_rule_is_an_error_naming_id_and_rule(bad_id: str) -> None:
    with pytest.raises(PayloadError) as caught:
        _build(history=_answered(ToolCallPart(id=bad_id, name="read_file")))
    message = str(caught.value)
    assert repr(bad_id) in message and "^[a-zA-Z0-9_-]+$" in message and "tool_use id" in message
    assert isinstance(caught.value, ConfigError)


def test_good_ids_and_names_pass() -> None:
    payload = _build(history=_answered(ToolCallPart(id="toolu_01-AB", name="get-weather_2")))
    block = payload["messages"][1]["content"][0]
    assert (block["id"], block["name"]) == ("toolu_01-AB", "get-weather_2")


def test_a_tool_name_outside_the_rule_is_an_error() -> None:
    with pytest.raises(
        PayloadError, match=r"tools\[1\]\.name.*'a\.b'.*\^\[a-zA-Z0-9_-\]\{1,64\}\$"
    ):
        _build(tools=(Tool(name="ok"), Tool(name="a.b")))
    with pytest.raises(PayloadError, match="'a.b'"):
        _build(history=_answered(ToolCallPart(id="c1", name="a.b")), tools=())


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [
        ("free text", {"value": "free text"}),
        ('{"path": "a"}', {"path": "a"}),
        ([1, 2], {"value": [1, 2]}),
        (None, {}),
    ],
)
def test_arguments_are_sent_as_an_object(arguments: object, sent: dict) -> None:
    call = ToolCallPart(id="c1", name="read_file", arguments=arguments)  # type: ignore[arg-type]
    assert _build(history=_answered(call))["messages"][1]["content"][0]["input"] == sent

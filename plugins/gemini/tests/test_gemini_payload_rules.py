"""What the Gemini adapter refuses to send (function names outside Gemini's rule) and what it
wraps (tool-call arguments that are not JSON objects)."""

from __future__ import annotations

import pytest
from lamina_gemini import plugin

from lamina import Message, Tool, ToolCallPart, ToolResultPart
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
        make_context(model="gemini-2.5-flash", provider="gemini", **kwargs), {}
    )


def test_dots_and_colons_are_gemini_names() -> None:
    from google.genai import types
    from pydantic import TypeAdapter

    payload = _build(tools=(Tool(name="files.read:v2"),))
    TypeAdapter(list[types.Tool]).validate_python(payload["tools"])
    assert payload["tools"][0]["functionDeclarations"][0]["name"] == "files.read:v2"


@pytest.mark.parametrize("name", ["1st_tool", "read file", "-x", "x" * 65, ""])
def test_a_function_name_outside_the_rule_is_an_error_naming_it(name: str) -> None:
    with pytest.raises(PayloadError) as caught:
        _build(tools=(Tool(name=name),))
    assert repr(name) in str(caught.value) and "Gemini's rule" in str(caught.value)
    with pytest.raises(PayloadError, match="tool call 'c1'"):
        _build(history=_answered(ToolCallPart(id="c1", name=name)), tools=())


@pytest.mark.parametrize(
    ("arguments", "sent"),
    [("free text", {"value": "free text"}), ('{"q": 1}', {"q": 1}), (7, {"value": 7})],
)
def test_arguments_are_sent_as_an_object(arguments: object, sent: dict) -> None:
    call = ToolCallPart(id="c1", name="read_file", arguments=arguments)  # type: ignore[arg-type]
    part = _build(history=_answered(call))["contents"][1]["parts"][0]
    assert part["functionCall"]["args"] == sent

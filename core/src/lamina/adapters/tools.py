"""Tools on the wire: definitions in the OpenAI function style, and call arguments as the
JSON object every provider requires.

Arguments are *wrapped*, never rejected: a recorded call happened, and refusing it would make
the session impossible to send again. A string holding a JSON object (OpenAI's wire form of
arguments) is decoded; ``null`` becomes ``{}``; any other value ``v`` (a string, list,
number or boolean) becomes ``{"value": v}``, so the model still sees what was passed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lamina.adapters.rules import NameRule
from lamina.model import Tool, ToolCallPart

#: The key a non-object argument value is wrapped under.
WRAPPED_ARGUMENT = "value"


def tool_arguments(part: ToolCallPart) -> dict[str, Any]:
    """The call's arguments as a JSON object (see the module docstring for the wrapping)."""
    return _decoded(part.arguments)


def call_part(id: str, name: str, arguments: Any) -> ToolCallPart:
    """A tool call a provider replied with; its arguments (an object, or OpenAI's JSON string
    of one; empty means none) wrapped as above when they are not an object."""
    return ToolCallPart(id=id, name=name, arguments=_decoded(arguments or None))


def _decoded(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            return decoded
    return {WRAPPED_ARGUMENT: arguments}


def arguments_json(part: ToolCallPart) -> str:
    """The call's arguments as the compact, key-sorted JSON object string providers echo back."""
    return json.dumps(
        tool_arguments(part), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


def openai_tools(
    tools: Sequence[Tool], *, rule: NameRule | None, adapter: str
) -> list[dict[str, Any]]:
    """Tool definitions as ``{"type": "function", "function": {name, description,
    parameters}}`` (OpenAI Chat Completions, Ollama and others), each name checked by
    ``rule`` when given."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name
                if rule is None
                else rule.check(tool.name, adapter=adapter, key=f"tools[{i}].name"),
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for i, tool in enumerate(tools)
    ]

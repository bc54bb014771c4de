"""OpenAI chat messages (``{"role", "content", "tool_calls", "tool_call_id"}``) → messages."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from lamina.converters._common import WHAT, field, image_from_url, need
from lamina.errors import SerdeError
from lamina.model.messages import (
    Message,
    MessageRole,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

_ROLES: dict[str, MessageRole] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


def from_openai_chat(messages: Iterable[Mapping[str, Any]]) -> tuple[Message, ...]:
    """Chat Completions messages as Lamina messages (``developer`` counts as ``system``)."""
    out = []
    for i, raw in enumerate(messages):
        where = f"$[{i}]"
        item = need(raw, Mapping, where, "a message object")
        role = field(item, "role", str, where)
        if role == "tool":
            content = _text(item.get("content"), f"{where}.content")
            call_id = field(item, "tool_call_id", str, where)
            out.append(
                Message(role="tool", content=(ToolResultPart(call_id=call_id, content=content),))
            )
            continue
        if role not in _ROLES:
            raise SerdeError([f"unknown role {role!r} @ {where}.role"], what=WHAT)
        parts: list[Part] = list(_parts(item.get("content"), f"{where}.content"))
        for n, call in enumerate(item.get("tool_calls") or ()):
            at = f"{where}.tool_calls[{n}]"
            call = need(call, Mapping, at, "a tool call object")
            function = field(call, "function", Mapping, at)
            parts.append(
                ToolCallPart(
                    id=field(call, "id", str, at),
                    name=field(function, "name", str, f"{at}.function"),
                    arguments=_arguments(
                        function.get("arguments", "{}"), f"{at}.function.arguments"
                    ),
                )
            )
        out.append(Message(role=_ROLES[role], content=tuple(parts), name=item.get("name")))
    return tuple(out)


def _parts(content: Any, where: str) -> Iterable[Part]:
    if content is None:
        return
    if isinstance(content, str):
        yield TextPart(text=content)
        return
    for n, raw in enumerate(need(content, list, where, "a string or a list of parts")):
        at = f"{where}[{n}]"
        part = need(raw, Mapping, at, "a content part object")
        kind = part.get("type")
        if kind == "text":
            yield TextPart(text=field(part, "text", str, at))
        elif kind == "image_url":
            image = field(part, "image_url", Mapping, at)
            yield image_from_url(field(image, "url", str, f"{at}.image_url"))
        else:
            raise SerdeError([f"unsupported content part type {kind!r} @ {at}.type"], what=WHAT)


def _text(content: Any, where: str) -> str:
    return "\n\n".join(p.text for p in _parts(content, where) if isinstance(p, TextPart))


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(need(raw, str, where, "a JSON string"))
    except json.JSONDecodeError as exc:
        raise SerdeError([f"not JSON ({exc.msg}) @ {where}"], what=WHAT) from exc
    return dict(need(value, dict, where, "a JSON object"))

"""LangChain messages (``SystemMessage``, ``HumanMessage``, ``AIMessage`` with ``tool_calls``,
``ToolMessage``) → messages. Read by their ``type`` and attributes, so langchain-core is not
needed to import this module; the objects come from the host's own LangChain."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lamina.converters._common import WHAT, image_from_url
from lamina.errors import SerdeError
from lamina.model.messages import (
    Message,
    MessageRole,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

_ROLES: dict[str, MessageRole] = {"system": "system", "human": "user", "ai": "assistant"}


def from_langchain_messages(messages: Iterable[Any]) -> tuple[Message, ...]:
    """LangChain ``BaseMessage`` s as Lamina messages."""
    out = []
    for i, message in enumerate(messages):
        kind = getattr(message, "type", None)
        where = f"$[{i}]"
        if kind == "tool":
            content = _text(getattr(message, "content", ""), where)
            result = ToolResultPart(
                call_id=str(getattr(message, "tool_call_id", "")),
                content=content,
                is_error=getattr(message, "status", "success") == "error",
            )
            out.append(Message(role="tool", content=(result,)))
            continue
        if kind not in _ROLES:
            raise SerdeError([f"unsupported message type {kind!r} @ {where}"], what=WHAT)
        parts = list(_parts(getattr(message, "content", ""), where))
        for call in getattr(message, "tool_calls", None) or ():
            parts.append(
                ToolCallPart(
                    id=str(call["id"]), name=str(call["name"]), arguments=dict(call["args"])
                )
            )
        out.append(Message(role=_ROLES[kind], content=tuple(parts)))
    return tuple(out)


def _parts(content: Any, where: str) -> Iterable[Part]:
    if isinstance(content, str):
        if content:
            yield TextPart(text=content)
        return
    if not isinstance(content, list):
        raise SerdeError([f"expected a string or a list @ {where}.content"], what=WHAT)
    for n, block in enumerate(content):
        if isinstance(block, str):
            yield TextPart(text=block)
        elif isinstance(block, dict) and block.get("type") == "text":
            yield TextPart(text=str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image_url":
            url = block.get("image_url")
            yield image_from_url(str(url.get("url") if isinstance(url, dict) else url))
        else:
            raise SerdeError([f"unsupported content block @ {where}.content[{n}]"], what=WHAT)


def _text(content: Any, where: str) -> str:
    return "\n\n".join(p.text for p in _parts(content, where) if isinstance(p, TextPart))

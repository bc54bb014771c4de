"""Anthropic messages (``{"role", "content": str | [blocks]}``) → messages.

Anthropic puts tool results in user messages; Lamina gives them their own ``tool`` message,
followed by a user message for any text that came with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lamina.converters._common import WHAT, field, need
from lamina.errors import SerdeError
from lamina.model.messages import ImagePart, Message, Part, TextPart, ToolCallPart, ToolResultPart


def from_anthropic_messages(
    messages: Iterable[Mapping[str, Any]], *, system: str | None = None
) -> tuple[Message, ...]:
    """Messages API messages (and the request's separate ``system`` text, if given)."""
    out = [Message.of("system", system)] if system else []
    for i, raw in enumerate(messages):
        where = f"$[{i}]"
        item = need(raw, Mapping, where, "a message object")
        role = field(item, "role", str, where)
        if role not in ("user", "assistant"):
            raise SerdeError([f"unknown role {role!r} @ {where}.role"], what=WHAT)
        content = item.get("content")
        if isinstance(content, str):
            out.append(Message.of(role, content))
            continue
        results: list[Part] = []
        parts: list[Part] = []
        for n, raw_block in enumerate(
            need(content, list, f"{where}.content", "a string or a list")
        ):
            at = f"{where}.content[{n}]"
            block = need(raw_block, Mapping, at, "a content block object")
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(text=field(block, "text", str, at)))
            elif kind == "tool_use":
                parts.append(
                    ToolCallPart(
                        id=field(block, "id", str, at),
                        name=field(block, "name", str, at),
                        arguments=dict(field(block, "input", Mapping, at)),
                    )
                )
            elif kind == "tool_result":
                results.append(
                    ToolResultPart(
                        call_id=field(block, "tool_use_id", str, at),
                        content=_result_text(block.get("content", ""), f"{at}.content"),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
            elif kind == "image":
                source = field(block, "source", Mapping, at)
                if source.get("type") == "base64":
                    parts.append(
                        ImagePart(
                            media_type=field(source, "media_type", str, f"{at}.source"),
                            data=field(source, "data", str, f"{at}.source"),
                        )
                    )
                else:
                    url = field(source, "url", str, f"{at}.source")
                    parts.append(ImagePart(media_type="image/*", url=url))
            elif kind in ("thinking", "redacted_thinking"):
                continue  # the model's private reasoning is not history
            else:
                raise SerdeError([f"unsupported block type {kind!r} @ {at}.type"], what=WHAT)
        if results:
            out.append(Message(role="tool", content=tuple(results)))
        if parts:
            out.append(Message(role=role, content=tuple(parts)))
    return tuple(out)


def _result_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for n, raw in enumerate(need(content, list, where, "a string or a list of blocks")):
        block = need(raw, Mapping, f"{where}[{n}]", "a content block object")
        if block.get("type") == "text":
            texts.append(field(block, "text", str, f"{where}[{n}]"))
    return "\n\n".join(texts)

"""Messages and their content parts: the provider-neutral shape of a conversation."""

from __future__ import annotations

from typing import Any, Literal

from attrs import field, frozen

from lamina.model.text import clean, clean_data

MessageRole = Literal["system", "user", "assistant", "tool"]


@frozen(kw_only=True)
class TextPart:
    """Plain text."""

    text: str = field(converter=clean)


@frozen(kw_only=True)
class ImagePart:
    """An image, inline (base64 ``data``) or by ``url``; exactly one is set."""

    media_type: str
    data: str | None = None
    url: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.data is None) == (self.url is None):
            raise ValueError("ImagePart needs exactly one of data or url")


@frozen(kw_only=True)
class ToolCallPart:
    """The model asking for a tool; ``id`` pairs it with its ``ToolResultPart``."""

    id: str = field(converter=clean)
    name: str = field(converter=clean)
    arguments: dict[str, Any] = field(factory=dict, converter=clean_data)


@frozen(kw_only=True)
class ToolResultPart:
    """What a tool returned for the call ``call_id``."""

    call_id: str = field(converter=clean)
    content: str = field(converter=clean)
    is_error: bool = False


Part = TextPart | ImagePart | ToolCallPart | ToolResultPart

#: The ``type`` tag each part carries in JSON.
PART_TAGS: dict[type, str] = {
    TextPart: "text",
    ImagePart: "image",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
}


@frozen(kw_only=True)
class Message:
    """One message: a role and its parts, with the provenance the Broker design keeps in ``context_json``."""

    role: MessageRole
    content: tuple[Part, ...]
    name: str | None = None
    context_json: dict[str, Any] | None = None

    @classmethod
    def of(cls, role: MessageRole, text: str, **kwargs: Any) -> Message:
        """A message holding one text part."""
        return cls(role=role, content=(TextPart(text=text),), **kwargs)

    @property
    def text(self) -> str:
        """The text of every text-bearing part, joined by blank lines."""
        return "\n\n".join(t for t in (part_text(p) for p in self.content) if t is not None)


def part_text(part: Part) -> str | None:
    """The text a part carries (``None`` for images and tool calls)."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolResultPart):
        return part.content
    return None

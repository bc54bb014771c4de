"""Sending through the ``anthropic`` SDK (the ``sdk`` extra): the payload posted as built to
``/v1/messages``, and the reply's text and tool uses read back."""

from __future__ import annotations

import os
from typing import Any

from lamina import Message, TextPart, ToolCallPart
from lamina.adapters import Reply, Transport, call_part, dig, stop_reason
from lamina_anthropic.models import PROVIDER
from lamina_anthropic.settings import AnthropicSettings

EXTRA = "lamina-anthropic[sdk]"
DEFAULT_BASE_URL = "https://api.anthropic.com"
PATH = "/v1/messages"


def reply(response: Any) -> Reply:
    """The reply's ``text`` and ``tool_use`` blocks in order (thinking blocks are the model's
    own and are left out)."""
    parts: list[TextPart | ToolCallPart] = []
    for block in dig(response, "content") or ():
        kind = dig(block, "type")
        if kind == "text" and dig(block, "text"):
            parts.append(TextPart(text=dig(block, "text")))
        elif kind == "tool_use":
            parts.append(
                call_part(dig(block, "id") or "", dig(block, "name") or "", dig(block, "input"))
            )
    calls = any(isinstance(p, ToolCallPart) for p in parts)
    return Reply(
        message=Message(role="assistant", content=tuple(parts)),
        stop_reason=stop_reason(dig(response, "stop_reason"), tool_calls=calls),
    )


def transport(settings: AnthropicSettings, _adapter: str) -> Transport:
    """How the ``anthropic`` adapter sends: the SDK client's own ``post`` sends the payload
    byte for byte as built (with the SDK's key header, version header and retries)."""

    def options() -> dict[str, Any]:
        return {
            "api_key": settings.api_key(),
            "base_url": settings.base_url,
            "timeout": settings.timeout,
            "max_retries": settings.max_retries,
        }

    def client() -> Any:
        from anthropic import Anthropic

        return Anthropic(**options())

    def aclient() -> Any:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(**options())

    def call(client: Any, payload: dict[str, Any], _model: str) -> Any:
        from anthropic.types import Message as Reply

        return client.post(PATH, body=payload, cast_to=Reply)

    async def acall(client: Any, payload: dict[str, Any], _model: str) -> Any:
        from anthropic.types import Message as Reply

        return await client.post(PATH, body=payload, cast_to=Reply)

    base = settings.base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
    return Transport(
        plugin=PROVIDER,
        sdk="anthropic",
        extra=EXTRA,
        client=client,
        aclient=aclient,
        call=call,
        acall=acall,
        reply=reply,
        endpoint=base.rstrip("/") + PATH,
    )

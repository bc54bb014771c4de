"""Sending through the ``ollama`` SDK (the ``sdk`` extra): the payload posted as built to
``/api/chat`` by the SDK's client (its host, headers, timeout and errors), and the reply's
text and tool calls read back.

The SDK's ``chat`` rebuilds the messages from its own types (it drops an empty ``content``,
for one), so the payload goes through the client's request method, which sends it unchanged.
"""

from __future__ import annotations

import os
from typing import Any

from lamina import Message, TextPart, ToolCallPart
from lamina.adapters import Reply, Transport, call_part, dig, stop_reason
from lamina_ollama.models import PROVIDER
from lamina_ollama.settings import OllamaSettings

EXTRA = "lamina-ollama[sdk]"
DEFAULT_HOST = "http://127.0.0.1:11434"
PATH = "/api/chat"


def reply(response: Any) -> Reply:
    """The message's text and tool calls (its ``thinking`` is left out); Ollama gives calls
    no id, so they are numbered ``call_0``, ``call_1``, … in order."""
    message = dig(response, "message")
    parts: list[TextPart | ToolCallPart] = []
    if dig(message, "content"):
        parts.append(TextPart(text=dig(message, "content")))
    for i, call in enumerate(dig(message, "tool_calls") or ()):
        name = dig(call, "function", "name") or ""
        parts.append(call_part(f"call_{i}", name, dig(call, "function", "arguments")))
    calls = any(isinstance(p, ToolCallPart) for p in parts)
    return Reply(
        message=Message(role="assistant", content=tuple(parts)),
        stop_reason=stop_reason(dig(response, "done_reason"), tool_calls=calls),
    )


def transport(settings: OllamaSettings, _adapter: str) -> Transport:
    """How the ``ollama`` adapter sends. ``api_key_env`` (for a hosted Ollama) is sent as a
    bearer token; the SDK does not retry, so ``max_retries`` does not apply."""

    def options() -> dict[str, Any]:
        key = settings.api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else None
        return {"host": settings.base_url, "timeout": settings.timeout, "headers": headers}

    def client() -> Any:
        from ollama import Client

        return Client(**options())

    def aclient() -> Any:
        from ollama import AsyncClient

        return AsyncClient(**options())

    def call(client: Any, payload: dict[str, Any], _model: str) -> Any:
        from ollama import ChatResponse

        return client._request(ChatResponse, "POST", PATH, json=payload)

    async def acall(client: Any, payload: dict[str, Any], _model: str) -> Any:
        from ollama import ChatResponse

        return await client._request(ChatResponse, "POST", PATH, json=payload)

    base = settings.base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_HOST
    return Transport(
        plugin=PROVIDER,
        sdk="ollama",
        extra=EXTRA,
        client=client,
        aclient=aclient,
        call=call,
        acall=acall,
        reply=reply,
        endpoint=base.rstrip("/") + PATH,
    )

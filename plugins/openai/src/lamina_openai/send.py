"""Sending through the ``openai`` SDK (the ``sdk`` extra): each adapter's payload posted as
built to ``/chat/completions`` or ``/responses``, and the reply read back."""

from __future__ import annotations

import os
from typing import Any

from lamina import Message, TextPart, ToolCallPart
from lamina.adapters import Reply, Transport, call_part, dig, stop_reason
from lamina_openai.models import PROVIDER
from lamina_openai.settings import OpenAISettings

EXTRA = "lamina-openai[sdk]"
DEFAULT_BASE_URL = "https://api.openai.com/v1"


def chat_reply(response: Any) -> Reply:
    """A Chat Completions reply: the first choice's text (or refusal) and tool calls."""
    choices = dig(response, "choices") or [None]
    message = dig(choices[0], "message")
    text = dig(message, "content") or dig(message, "refusal") or ""
    calls = [
        call_part(
            dig(c, "id") or f"call_{i}",
            dig(c, "function", "name") or "",
            dig(c, "function", "arguments"),
        )
        for i, c in enumerate(dig(message, "tool_calls") or ())
    ]
    return _reply(text, calls, dig(choices[0], "finish_reason"))


def responses_reply(response: Any) -> Reply:
    """A Responses reply: the output messages' text (refusals too) and function calls, in
    order; an ``incomplete`` reply stopped for its ``incomplete_details.reason``."""
    texts: list[str] = []
    calls: list[ToolCallPart] = []
    for item in dig(response, "output") or ():
        kind = dig(item, "type")
        if kind == "message":
            for content in dig(item, "content") or ():
                piece = dig(content, "text") or dig(content, "refusal")
                if piece:
                    texts.append(piece)
        elif kind == "function_call":
            call_id = dig(item, "call_id") or dig(item, "id") or f"call_{len(calls)}"
            calls.append(call_part(call_id, dig(item, "name") or "", dig(item, "arguments")))
    reason = dig(response, "incomplete_details", "reason") or dig(response, "status")
    return _reply("".join(texts), calls, reason)


def _reply(text: str, calls: list[ToolCallPart], reason: Any) -> Reply:
    parts = ([TextPart(text=text)] if text else []) + calls
    return Reply(
        message=Message(role="assistant", content=tuple(parts)),
        stop_reason=stop_reason(reason, tool_calls=bool(calls)),
    )


def transport(settings: OpenAISettings, adapter: str) -> Transport:
    """How ``adapter`` (``openai`` or ``openai-responses``) sends through the ``openai`` SDK:
    the client's own ``post`` sends the payload byte for byte as the adapter built it."""
    chat = adapter == "openai"
    path = "/chat/completions" if chat else "/responses"

    def options() -> dict[str, Any]:
        return {
            "api_key": settings.api_key(),
            "base_url": settings.base_url,
            "timeout": settings.timeout,
            "max_retries": settings.max_retries,
        }

    def client() -> Any:
        from openai import OpenAI

        return OpenAI(**options())

    def aclient() -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(**options())

    def cast() -> type:
        from openai.types.chat import ChatCompletion
        from openai.types.responses import Response

        return ChatCompletion if chat else Response

    def call(client: Any, payload: dict[str, Any], _model: str) -> Any:
        return client.post(path, body=payload, cast_to=cast())

    async def acall(client: Any, payload: dict[str, Any], _model: str) -> Any:
        return await client.post(path, body=payload, cast_to=cast())

    base = settings.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    return Transport(
        plugin=PROVIDER,
        sdk="openai",
        extra=EXTRA,
        client=client,
        aclient=aclient,
        call=call,
        acall=acall,
        reply=chat_reply if chat else responses_reply,
        endpoint=base.rstrip("/") + path,
    )

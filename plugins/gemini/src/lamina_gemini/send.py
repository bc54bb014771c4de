"""Sending through the ``google-genai`` SDK (the ``sdk`` extra): the payload posted as built
to ``models/{model}:generateContent`` by the SDK's API client (its key header, base URL,
timeout and retries), and the reply's text and function calls read back.

The SDK's ``generate_content`` takes its own types and writes the request again from them
(snake-case keys in places), so the payload goes through the client's request method, which
sends it unchanged."""

from __future__ import annotations

import json
import os
from typing import Any

from lamina import Message, TextPart, ToolCallPart
from lamina.adapters import Reply, Transport, call_part, dig, stop_reason
from lamina_gemini.models import PROVIDER
from lamina_gemini.settings import GeminiSettings

EXTRA = "lamina-gemini[sdk]"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"


def path(model: str) -> str:
    """``models/{model}:generateContent`` for the bare model name."""
    return f"models/{model.strip().rpartition('/')[2]}:generateContent"


def reply(response: Any) -> Reply:
    """The first candidate's text (thoughts left out) and function calls; a prompt the API
    blocked is a ``refusal`` with no content."""
    candidates = dig(response, "candidates") or [None]
    parts: list[TextPart | ToolCallPart] = []
    for part in dig(candidates[0], "content", "parts") or ():
        call = dig(part, "function_call")
        if call is not None:
            call_id = dig(call, "id") or f"call_{len(parts)}"
            parts.append(call_part(call_id, dig(call, "name") or "", dig(call, "args")))
        elif dig(part, "text") and not dig(part, "thought"):
            parts.append(TextPart(text=dig(part, "text")))
    reason = dig(candidates[0], "finish_reason")
    if candidates[0] is None and dig(response, "prompt_feedback", "block_reason"):
        reason = "refusal"
    calls = any(isinstance(p, ToolCallPart) for p in parts)
    return Reply(
        message=Message(role="assistant", content=tuple(parts)),
        stop_reason=stop_reason(reason, tool_calls=calls),
    )


def transport(settings: GeminiSettings, _adapter: str) -> Transport:
    """How the ``gemini`` adapter sends through the ``google-genai`` SDK."""

    def client() -> Any:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(
            base_url=settings.base_url,
            api_version=API_VERSION,
            timeout=int(settings.timeout * 1000),
            retry_options=types.HttpRetryOptions(attempts=settings.max_retries + 1),
        )
        return genai.Client(api_key=settings.api_key(), http_options=options)

    def call(client: Any, payload: dict[str, Any], model: str) -> Any:
        answer = client._api_client.request("post", path(model), payload)
        return json.loads(answer.body or "{}")

    async def acall(client: Any, payload: dict[str, Any], model: str) -> Any:
        answer = await client.aio._api_client.async_request("post", path(model), payload)
        return json.loads(answer.body or "{}")

    base = settings.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL
    return Transport(
        plugin=PROVIDER,
        sdk="google.genai",
        extra=EXTRA,
        client=client,
        aclient=client,
        call=call,
        acall=acall,
        reply=reply,
        endpoint=f"{base.rstrip('/')}/{API_VERSION}/models/…:generateContent",
    )

"""The Gemini adapter sends through the ``google-genai`` SDK to a local server speaking
``generateContent`` (recorded replies; nothing reaches the network)."""

from __future__ import annotations

from typing import Any, ClassVar

from lamina_gemini import plugin

from lamina import Message, TextPart, ToolCallPart, Usage
from lamina.testing.send_suite import SendConformance
from lamina.testing.wire_server import Answer

#: A ``generateContent`` reply: a thought, text and a function call; implicit cache hits.
REPLY: dict[str, Any] = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "The user wants the changelog.", "thought": True},
                    {"text": "I'll read the changelog first."},
                    {
                        "functionCall": {
                            "id": "fc-7a1",
                            "name": "read_file",
                            "args": {"path": "CHANGELOG.md"},
                        }
                    },
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 2006,
        "cachedContentTokenCount": 1920,
        "candidatesTokenCount": 250,
        "thoughtsTokenCount": 50,
        "totalTokenCount": 2306,
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "mAitaLmkHPPlz7IPvtfUqQ4",
}


class TestGenerateContentSend(SendConformance):
    plugin = plugin
    plugin_name = "gemini"
    adapter = "gemini"
    model = "gemini-2.5-flash"
    sdk = "google.genai"
    extra = "lamina-gemini[sdk]"
    path = "/v1beta/models/gemini-2.5-flash:generateContent"
    reply: ClassVar[dict[str, Any]] = REPLY
    message = Message(
        role="assistant",
        content=(
            TextPart(text="I'll read the changelog first."),
            ToolCallPart(id="fc-7a1", name="read_file", arguments={"path": "CHANGELOG.md"}),
        ),
    )
    usage = Usage(input_tokens=2006, cached_input_tokens=1920, output_tokens=300)
    stop_reason = "tool_use"
    empty_reply: ClassVar[dict[str, Any]] = {
        "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "MAX_TOKENS"}],
        "usageMetadata": {"promptTokenCount": 20, "totalTokenCount": 20},
    }
    overflow = Answer(
        status=400,
        body={
            "error": {
                "code": 400,
                "message": "The input token count (1200000) exceeds the maximum number of "
                "tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
    )
    failure = Answer(
        status=500,
        body={
            "error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}
        },
    )

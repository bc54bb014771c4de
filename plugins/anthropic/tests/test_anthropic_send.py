"""The Anthropic adapter sends through the ``anthropic`` SDK to a local server speaking the
Messages API (recorded replies; nothing reaches the network)."""

from __future__ import annotations

from typing import Any, ClassVar

from lamina_anthropic import plugin

from lamina import Message, TextPart, ToolCallPart, Usage
from lamina.testing.send_suite import SendConformance
from lamina.testing.wire_server import Answer

#: A Messages reply as the API returns it: thinking, text and a tool use; cache reads/writes.
REPLY: dict[str, Any] = {
    "id": "msg_01Aq9w938a90dw8q",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {"type": "thinking", "thinking": "The user wants the changelog.", "signature": "EqQB"},
        {"type": "text", "text": "I'll read the changelog first."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "read_file",
            "input": {"path": "CHANGELOG.md"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 86,
        "cache_creation_input_tokens": 120,
        "cache_read_input_tokens": 1800,
        "output_tokens": 300,
        "service_tier": "standard",
    },
}


class TestMessagesSend(SendConformance):
    plugin = plugin
    plugin_name = "anthropic"
    adapter = "anthropic"
    model = "claude-sonnet-4-5"
    sdk = "anthropic"
    extra = "lamina-anthropic[sdk]"
    path = "/v1/messages"
    reply: ClassVar[dict[str, Any]] = REPLY
    message = Message(
        role="assistant",
        content=(
            TextPart(text="I'll read the changelog first."),
            ToolCallPart(
                id="toolu_01A09q90qw90lq917835lq9",
                name="read_file",
                arguments={"path": "CHANGELOG.md"},
            ),
        ),
    )
    usage = Usage(
        input_tokens=86 + 120 + 1800,
        cached_input_tokens=1800,
        cache_creation_tokens=120,
        output_tokens=300,
    )
    stop_reason = "tool_use"
    empty_reply: ClassVar[dict[str, Any]] = {**REPLY, "content": [], "stop_reason": "max_tokens"}
    overflow = Answer(
        status=400,
        body={
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 215000 tokens > 200000 maximum",
            },
        },
    )
    failure = Answer(
        status=500,
        body={"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
    )

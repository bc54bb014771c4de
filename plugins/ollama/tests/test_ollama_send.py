"""The Ollama adapter sends through the ``ollama`` SDK to a local server speaking
``/api/chat`` (recorded replies; nothing reaches the network)."""

from __future__ import annotations

from typing import Any, ClassVar

from lamina_ollama import plugin

from lamina import Message, TextPart, ToolCallPart, Usage
from lamina.testing.send_suite import SendConformance
from lamina.testing.wire_server import Answer

#: An ``/api/chat`` reply (not streamed): text, thinking and a tool call.
REPLY: dict[str, Any] = {
    "model": "qwen3:8b",
    "created_at": "2025-07-28T17:25:32.061983Z",
    "message": {
        "role": "assistant",
        "content": "I'll read the changelog first.",
        "thinking": "The user wants the changelog.",
        "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "CHANGELOG.md"}}}],
    },
    "done_reason": "stop",
    "done": True,
    "total_duration": 4883583458,
    "load_duration": 1334875,
    "prompt_eval_count": 2006,
    "prompt_eval_duration": 342546000,
    "eval_count": 300,
    "eval_duration": 4535599000,
}


class TestChatSend(SendConformance):
    plugin = plugin
    plugin_name = "ollama"
    adapter = "ollama"
    model = "qwen3:8b"
    sdk = "ollama"
    extra = "lamina-ollama[sdk]"
    path = "/api/chat"
    reply: ClassVar[dict[str, Any]] = REPLY
    message = Message(
        role="assistant",
        content=(
            TextPart(text="I'll read the changelog first."),
            ToolCallPart(id="call_0", name="read_file", arguments={"path": "CHANGELOG.md"}),
        ),
    )
    usage = Usage(input_tokens=2006, output_tokens=300)  # Ollama reports no cache figures
    stop_reason = "tool_use"
    empty_reply: ClassVar[dict[str, Any]] = {
        **REPLY,
        "message": {"role": "assistant", "content": ""},
        "done_reason": "length",
    }
    overflow = Answer(
        status=400, body={"error": "the input length exceeds the context length (8192 tokens)"}
    )
    failure = Answer(status=500, body={"error": "llama runner process has terminated"})

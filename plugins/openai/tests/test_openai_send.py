"""Both OpenAI adapters send through the ``openai`` SDK to a local server speaking OpenAI's
wire protocol (recorded replies; nothing reaches the network)."""

from __future__ import annotations

from typing import Any, ClassVar

from lamina_openai import plugin

from lamina import Message, TextPart, ToolCallPart, Usage
from lamina.testing.send_suite import SendConformance
from lamina.testing.wire_server import Answer

#: A Chat Completions reply as the API returns it (text, one tool call, cached prompt tokens).
CHAT_REPLY: dict[str, Any] = {
    "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
    "object": "chat.completion",
    "created": 1741570283,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "I'll read the changelog first.",
                "refusal": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path":"CHANGELOG.md"}'},
                    }
                ],
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}

#: A Responses reply: a reasoning item, a message and a function call.
RESPONSES_REPLY: dict[str, Any] = {
    "id": "resp_67ccd2bed1ec8190b14f964abc054267",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "model": "o3-2025-04-16",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "I'll read the changelog first.", "annotations": []}
            ],
        },
        {
            "type": "function_call",
            "id": "fc_12345",
            "call_id": "call_abc123",
            "name": "read_file",
            "arguments": '{"path":"CHANGELOG.md"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 2006,
        "input_tokens_details": {"cached_tokens": 1920},
        "output_tokens": 300,
        "output_tokens_details": {"reasoning_tokens": 128},
        "total_tokens": 2306,
    },
}

MESSAGE = Message(
    role="assistant",
    content=(
        TextPart(text="I'll read the changelog first."),
        ToolCallPart(id="call_abc123", name="read_file", arguments={"path": "CHANGELOG.md"}),
    ),
)
OVERFLOW = Answer(
    status=400,
    body={
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    },
)


class TestChatCompletionsSend(SendConformance):
    plugin = plugin
    plugin_name = "openai"
    adapter = "openai"
    model = "gpt-4o"
    sdk = "openai"
    extra = "lamina-openai[sdk]"
    path = "/v1/chat/completions"
    base_path = "/v1"
    reply: ClassVar[dict[str, Any]] = CHAT_REPLY
    message = MESSAGE
    usage = Usage(input_tokens=2006, cached_input_tokens=1920, output_tokens=300)
    stop_reason = "tool_use"
    empty_reply: ClassVar[dict[str, Any]] = {
        **CHAT_REPLY,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "length",
            }
        ],
    }
    overflow = OVERFLOW


class TestResponsesSend(SendConformance):
    plugin = plugin
    plugin_name = "openai"
    adapter = "openai-responses"
    model = "o3"
    sdk = "openai"
    extra = "lamina-openai[sdk]"
    path = "/v1/responses"
    base_path = "/v1"
    reply: ClassVar[dict[str, Any]] = RESPONSES_REPLY
    message = MESSAGE
    usage = Usage(input_tokens=2006, cached_input_tokens=1920, output_tokens=300)
    stop_reason = "tool_use"
    empty_reply: ClassVar[dict[str, Any]] = {
        **RESPONSES_REPLY,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "reasoning", "id": "rs_1", "summary": []}],
    }
    overflow = OVERFLOW

"""Both OpenAI adapters pass the kernel's adapter conformance suite, validated against the
openai SDK's ``CompletionCreateParams`` and ``ResponseCreateParams``."""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

import pytest
from lamina_openai import plugin

from lamina import Adapter, Usage
from lamina.testing.adapters import AdapterConformance, ToolEvent, make_context, strict_check

OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
RATE_LIMIT = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}}


def sdk_validator(type_: Any) -> Any:
    """pydantic's ``TypeAdapter`` for the SDK type, plus the kernel's strict walk that rejects
    keys the TypedDicts do not declare (``TypeAdapter`` alone ignores those)."""
    from pydantic import TypeAdapter

    adapter, strict = TypeAdapter(type_), strict_check(type_)

    def validate(payload: dict[str, Any]) -> None:
        adapter.validate_python(payload)
        strict(payload)

    return validate


def adapters() -> dict[str, Adapter]:
    return {a.name: a for a in plugin.lamina_adapters(settings=None)}


@cache
def chat_validator() -> Any:
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    return sdk_validator(CompletionCreateParamsNonStreaming)


@cache
def responses_validator() -> Any:
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming

    return sdk_validator(ResponseCreateParamsNonStreaming)


class TestChatCompletions(AdapterConformance):
    models = ("gpt-4o", "o3-mini")
    provider = "openai"
    requires_alternation = False
    first_must_be_user = False
    usage_samples: ClassVar[Any] = (
        (
            {
                "usage": {
                    "prompt_tokens": 2006,
                    "completion_tokens": 300,
                    "total_tokens": 2306,
                    "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                }
            },
            Usage(input_tokens=2006, cached_input_tokens=1920, output_tokens=300),
        ),
        (
            {"usage": {"prompt_tokens": 12, "completion_tokens": 3}},
            Usage(input_tokens=12, output_tokens=3),
        ),
    )
    overflow_errors = (OVERFLOW, "Error code: 400 - context_length_exceeded")
    other_errors = (RATE_LIMIT, ValueError("bad"))

    def make_adapter(self) -> Adapter:
        return adapters()["openai"]

    def validate(self, payload: dict[str, Any]) -> None:
        chat_validator()(payload)

    def system_text(self, payload: dict[str, Any]) -> str:
        first = payload["messages"][0]
        assert first["role"] in ("system", "developer")
        return str(first["content"])

    def _conversation(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in payload["messages"] if m["role"] not in ("system", "developer")]

    def roles(self, payload: dict[str, Any]) -> list[str]:
        return [
            "assistant" if m["role"] == "assistant" else "user" for m in self._conversation(payload)
        ]

    def tool_events(self, payload: dict[str, Any]) -> list[ToolEvent]:
        events: list[ToolEvent] = []
        for i, m in enumerate(self._conversation(payload)):
            events += [("call", c["id"], i) for c in m.get("tool_calls", [])]
            if m["role"] == "tool":
                events.append(("result", m["tool_call_id"], i))
        return events


class TestResponses(AdapterConformance):
    models = ("gpt-4.1", "gpt-5")
    provider = "openai"
    requires_alternation = False
    first_must_be_user = False
    usage_samples: ClassVar[Any] = (
        (
            {
                "usage": {
                    "input_tokens": 5000,
                    "input_tokens_details": {"cached_tokens": 4096},
                    "output_tokens": 77,
                    "output_tokens_details": {"reasoning_tokens": 40},
                    "total_tokens": 5077,
                }
            },
            Usage(input_tokens=5000, cached_input_tokens=4096, output_tokens=77),
        ),
    )
    overflow_errors = (
        {
            "error": {
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
            }
        },
    )
    other_errors = (RATE_LIMIT,)

    def make_adapter(self) -> Adapter:
        return adapters()["openai-responses"]

    def validate(self, payload: dict[str, Any]) -> None:
        responses_validator()(payload)

    def system_text(self, payload: dict[str, Any]) -> str:
        return str(payload["instructions"])

    def roles(self, payload: dict[str, Any]) -> list[str]:
        kinds = {"function_call": "assistant", "function_call_output": "user"}
        return [kinds.get(i["type"]) or i["role"] for i in payload["input"]]

    def tool_events(self, payload: dict[str, Any]) -> list[ToolEvent]:
        kinds = {"function_call": "call", "function_call_output": "result"}
        return [
            (kinds[i["type"]], i["call_id"], n)
            for n, i in enumerate(payload["input"])
            if i["type"] in kinds
        ]  # type: ignore[misc]


def test_validator_rejects_a_nested_unknown_key() -> None:
    payload = adapters()["openai"].build_request(
        make_context(model="gpt-4o", provider="openai"), {}
    )
    payload["messages"][0]["cache_control"] = {"type": "ephemeral"}
    with pytest.raises(AssertionError, match="cache_control"):
        chat_validator()(payload)
    bad_literal = {**payload, "messages": [{"role": "sytem", "content": "x"}]}
    with pytest.raises(Exception):  # noqa: B017
        chat_validator()(bad_literal)

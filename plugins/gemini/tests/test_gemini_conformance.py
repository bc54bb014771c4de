"""The Gemini adapter passes the kernel's conformance suite, each part of the body validated
against google-genai's own models (which forbid unknown keys); model info and usage."""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar

import pytest
from lamina_gemini import plugin

from lamina import Adapter, ImagePart, Message, TextPart, Usage
from lamina.testing.adapters import SCENARIOS, AdapterConformance, ToolEvent, make_context

#: The fields of the REST ``GenerateContentRequest`` body (the model is in the URL).
REQUEST_FIELDS = frozenset(
    {
        "contents",
        "systemInstruction",
        "tools",
        "toolConfig",
        "safetySettings",
        "generationConfig",
        "cachedContent",
    }
)


@cache
def validators() -> dict[str, Any]:
    from google.genai import types
    from pydantic import TypeAdapter

    return {
        "contents": TypeAdapter(list[types.Content]),
        "systemInstruction": TypeAdapter(types.Content),
        "tools": TypeAdapter(list[types.Tool]),
        "generationConfig": TypeAdapter(types.GenerationConfig),
    }


def validate(payload: dict[str, Any]) -> None:
    unknown = set(payload) - REQUEST_FIELDS
    assert not unknown, f"keys not in GenerateContentRequest: {unknown}"
    assert payload["contents"], "contents must not be empty"
    for key, value in payload.items():
        validators()[key].validate_python(value)


def adapter() -> Adapter:
    return plugin.lamina_adapters(settings=None)[0]


class TestGemini(AdapterConformance):
    models = ("gemini-2.5-pro", "models/gemini-2.5-flash")
    provider = "gemini"
    usage_samples: ClassVar[Any] = (
        (
            {
                "usageMetadata": {
                    "promptTokenCount": 9000,
                    "cachedContentTokenCount": 8000,
                    "candidatesTokenCount": 120,
                    "thoughtsTokenCount": 30,
                    "totalTokenCount": 9150,
                }
            },
            Usage(input_tokens=9000, cached_input_tokens=8000, output_tokens=150),
        ),
    )
    overflow_errors = (
        {
            "error": {
                "code": 400,
                "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
    )
    other_errors = (
        {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}},
    )

    def make_adapter(self) -> Adapter:
        return adapter()

    def validate(self, payload: dict[str, Any]) -> None:
        validate(payload)

    def system_text(self, payload: dict[str, Any]) -> str:
        return "".join(p["text"] for p in payload["systemInstruction"]["parts"])

    def roles(self, payload: dict[str, Any]) -> list[str]:
        return ["assistant" if c["role"] == "model" else c["role"] for c in payload["contents"]]

    def tool_events(self, payload: dict[str, Any]) -> list[ToolEvent]:
        events: list[ToolEvent] = []
        for i, content in enumerate(payload["contents"]):
            for part in content["parts"]:
                if "functionCall" in part:
                    events.append(("call", part["functionCall"]["id"], i))
                if "functionResponse" in part:
                    events.append(("result", part["functionResponse"]["id"], i))
        return events


def test_unknown_nested_key_is_rejected() -> None:
    payload = adapter().build_request(make_context(model="gemini-2.5-pro", provider="gemini"), {})
    validate(payload)
    payload["contents"][0]["parts"][0]["cache_control"] = {"type": "ephemeral"}
    with pytest.raises(Exception, match="cache_control"):
        validate(payload)


def test_function_responses_carry_name_and_error() -> None:
    context = make_context(
        model="gemini-2.5-flash", provider="gemini", history=SCENARIOS["tool-round-trip"]
    )
    contents = adapter().build_request(context, {})["contents"]
    assert contents[1]["role"] == "model"
    assert [p.get("functionCall", {}).get("name") for p in contents[1]["parts"]] == [
        None,
        "read_file",
        "read_file",
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"id": "call_1", "name": "read_file", "response": {"error": "first"}}},
        {
            "functionResponse": {
                "id": "call_2",
                "name": "read_file",
                "response": {"output": "second"},
            }
        },
    ]


def test_images_inline_and_by_uri() -> None:
    context = make_context(
        model="gemini-2.5-flash",
        provider="gemini",
        attachments=(
            ImagePart(media_type="image/png", data="AAAA"),
            ImagePart(media_type="image/jpeg", url="gs://bucket/cat.jpg"),
        ),
    )
    last = adapter().build_request(context, {})["contents"][-1]
    assert last["parts"][1:] == [
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://bucket/cat.jpg"}},
    ]


def test_first_turn_is_user_and_lead_in_is_text() -> None:
    history = (Message(role="assistant", content=(TextPart(text="I said hi."),)),)
    context = make_context(model="gemini-2.5-flash", provider="gemini", history=history)
    contents = adapter().build_request(context, {})["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]


def test_model_info() -> None:
    info = plugin.lamina_model_info("models/gemini-2.5-pro", None)
    assert info is not None
    assert (info.name, info.context_window, info.max_output) == (
        "gemini-2.5-pro",
        1_048_576,
        65_536,
    )
    assert (info.provider, info.min_cache_prefix) == ("gemini", 4096)
    flash = plugin.lamina_model_info("gemini-2.5-flash", None)
    assert flash is not None and flash.min_cache_prefix == 1024
    assert plugin.lamina_model_info("claude-sonnet-4", None) is None
    tok = plugin.lamina_tokenizer(model="gemini-2.5-pro", info=info)
    assert tok is not None and tok.exact is False

"""The Ollama adapter passes the kernel's conformance suite, validated by round-tripping
each payload through the ollama SDK's own ``ChatRequest`` (which would drop any key it does
not declare, so a round trip that changes nothing proves there is none)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from lamina_ollama import plugin

from lamina import Adapter, ImagePart, Usage
from lamina.testing.adapters import SCENARIOS, AdapterConformance, ToolEvent, make_context


def validate(payload: dict[str, Any]) -> None:
    from ollama._types import ChatRequest, Image, Message

    messages = [
        Message.model_validate({**m, "images": [Image(value=i) for i in m["images"]]})
        if "images" in m
        else Message.model_validate(m)
        for m in payload["messages"]
    ]
    request = ChatRequest.model_validate({**payload, "messages": messages})
    dumped = request.model_dump(exclude_none=True, by_alias=True)
    assert dumped == payload, "the SDK's ChatRequest does not reproduce the payload"


def adapter() -> Adapter:
    return plugin.lamina_adapters(settings=None)[0]


class TestOllama(AdapterConformance):
    models = ("llama3.2:3b", "ollama/gpt-oss:20b")
    provider = "ollama"
    requires_alternation = False
    first_must_be_user = False
    checks_tool_names = False  # Ollama documents no rule for tool names
    usage_samples: ClassVar[Any] = (
        (
            {"model": "llama3.2:3b", "done": True, "prompt_eval_count": 812, "eval_count": 64},
            Usage(input_tokens=812, output_tokens=64),
        ),
    )
    overflow_errors = ({"error": "input length exceeds maximum context length"},)
    other_errors = ({"error": "model 'llama9' not found"},)

    def make_adapter(self) -> Adapter:
        return adapter()

    def validate(self, payload: dict[str, Any]) -> None:
        validate(payload)

    def system_text(self, payload: dict[str, Any]) -> str:
        first = payload["messages"][0]
        assert first["role"] == "system"
        assert all(m["role"] != "system" for m in payload["messages"][1:])
        return str(first["content"])

    def _conversation(self, payload: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in payload["messages"] if m["role"] != "system"]

    def roles(self, payload: dict[str, Any]) -> list[str]:
        return [
            "assistant" if m["role"] == "assistant" else "user" for m in self._conversation(payload)
        ]

    def tool_events(self, payload: dict[str, Any]) -> list[ToolEvent]:
        """Ollama has no call ids: results answer the calls before them in order, by name."""
        events: list[ToolEvent] = []
        pending: list[tuple[str, str]] = []
        for i, m in enumerate(self._conversation(payload)):
            if m["role"] == "assistant":
                pending = []
                for j, call in enumerate(m.get("tool_calls", [])):
                    pending.append((f"{i}.{j}", call["function"]["name"]))
                    events.append(("call", f"{i}.{j}", i))
            elif m["role"] == "tool":
                call_id, name = pending.pop(0) if pending else (f"stray{i}", "")
                assert m["tool_name"] == name
                events.append(("result", call_id, i))
        return events


def test_unknown_key_is_rejected() -> None:
    payload = adapter().build_request(make_context(model="llama3.2:3b", provider="ollama"), {})
    validate(payload)
    payload["messages"][0]["cache_control"] = {"type": "ephemeral"}
    with pytest.raises(AssertionError):
        validate(payload)


def test_num_ctx_is_the_planned_window_and_system_goes_first() -> None:
    context = make_context(model="llama3.2:3b", provider="ollama", system="RULES")
    payload = adapter().build_request(context, {})
    assert payload["options"] == {"num_ctx": 200_000, "num_predict": 4096}
    assert payload["messages"][0] == {"role": "system", "content": "RULES"}
    assert payload["stream"] is False and payload["model"] == "llama3.2:3b"
    assert adapter().native_system is False


def test_tool_messages_and_images() -> None:
    context = make_context(
        model="ollama/qwen3:8b",
        provider="ollama",
        history=SCENARIOS["tool-round-trip"],
        attachments=(
            ImagePart(media_type="image/png", data="AAAA"),
            ImagePart(media_type="image/png", url="https://x/y.png"),
        ),
    )
    payload = adapter().build_request(context, {})
    assert payload["model"] == "qwen3:8b"
    messages = payload["messages"]
    assert messages[2]["tool_calls"] == [
        {"function": {"name": "read_file", "arguments": {"path": "notes/call_1.md"}}},
        {"function": {"name": "read_file", "arguments": {"path": "notes/call_2.md"}}},
    ]
    assert messages[3:5] == [
        {"role": "tool", "content": "[tool error]\nfirst", "tool_name": "read_file"},
        {"role": "tool", "content": "second", "tool_name": "read_file"},
    ]
    assert messages[-1]["images"] == ["AAAA"]
    assert "https://x/y.png" in messages[-1]["content"]


def test_model_info() -> None:
    info = plugin.lamina_model_info("llama3.2:3b", None)
    assert info is not None and (info.context_window, info.provider) == (4096, "ollama")
    cloud = plugin.lamina_model_info("ollama/gpt-oss:120b", None)
    assert cloud is not None and cloud.name == "gpt-oss:120b" and cloud.context_window > 4096
    assert plugin.lamina_model_info("gpt-4o", None) is None
    assert plugin.lamina_model_info("ft:gpt-4o:org:custom", None) is None

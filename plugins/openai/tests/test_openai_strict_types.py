"""The strict checker the conformance suite validates payloads with really rejects what the
SDK types do not declare, where pydantic's ``TypeAdapter`` alone lets it through."""

from __future__ import annotations

import pytest

from lamina.testing.adapters import StrictTypeError, strict_check

GOOD = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    ],
    "prompt_cache_key": "s",
}


def chat_type():
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

    return CompletionCreateParamsNonStreaming


def test_type_adapter_alone_ignores_unknown_keys() -> None:
    from pydantic import TypeAdapter

    sneaky = {**GOOD, "messages": [{"role": "user", "content": "hi", "cache_control": {}}]}
    TypeAdapter(chat_type()).validate_python(sneaky)  # passes: the reason for strict_check
    with pytest.raises(StrictTypeError, match=r"messages\[0\]\.cache_control"):
        strict_check(chat_type())(sneaky)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda p: p.pop("model"), r"\.model: required"),
        (lambda p: p.update(bogus=1), r"\.bogus: key not declared"),
        (lambda p: p["messages"][0].update(role="sytem"), r"messages\[0\]"),
        (lambda p: p["messages"][1]["tool_calls"][0].update(type="fn"), r"tool_calls\[0\]\.type"),
        (lambda p: p["messages"][2].pop("tool_call_id"), r"tool_call_id: required"),
        (lambda p: p["messages"][3]["content"][0].update(text=5), r"content\[0\]\.text"),
        (lambda p: p.update(prompt_cache_key=["s"]), r"\.prompt_cache_key"),
        (lambda p: p.update(messages={"role": "user"}), r"\.messages: expected a list"),
    ],
)
def test_strict_check_rejects(change, where: str) -> None:
    import copy

    check = strict_check(chat_type())
    check(GOOD)
    bad = copy.deepcopy(GOOD)
    change(bad)
    with pytest.raises(StrictTypeError, match=where):
        check(bad)

"""The Anthropic adapter passes the kernel's conformance suite, validated against the
anthropic SDK's ``MessageCreateParams``; breakpoints, TTL, model info and usage."""

from __future__ import annotations

import json
import warnings
from functools import cache
from typing import Any, ClassVar

import pytest
from lamina_anthropic import plugin
from lamina_anthropic.settings import AnthropicSettings

from lamina import Adapter, Block, LaminaError, Message, Usage
from lamina.adapters import ModelOverride
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.adapters import (
    SCENARIOS,
    AdapterConformance,
    ToolEvent,
    make_context,
    strict_check,
)


@cache
def validator() -> Any:
    """pydantic's ``TypeAdapter`` plus the kernel's strict walk rejecting undeclared keys."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming
    from pydantic import TypeAdapter

    adapter = TypeAdapter(MessageCreateParamsNonStreaming)
    strict = strict_check(MessageCreateParamsNonStreaming)

    def validate(payload: dict[str, Any]) -> None:
        adapter.validate_python(payload)
        strict(payload)

    return validate


def adapter(settings: AnthropicSettings | None = None) -> Adapter:
    return plugin.lamina_adapters(settings=settings)[0]


def breakpoints(payload: Any) -> list[dict[str, Any]]:
    """Every ``cache_control`` in the payload, wherever it is."""
    if isinstance(payload, dict):
        found = [payload["cache_control"]] if "cache_control" in payload else []
        return found + [c for v in payload.values() for c in breakpoints(v)]
    if isinstance(payload, list):
        return [c for v in payload for c in breakpoints(v)]
    return []


class TestAnthropic(AdapterConformance):
    models = ("claude-sonnet-4-20250514", "claude-haiku-4-5", "claude-3-5-haiku-20241022")
    provider = "anthropic"
    uses_cache_breakpoints = True
    usage_samples: ClassVar[Any] = (
        (
            {
                "id": "msg_1",
                "usage": {
                    "input_tokens": 50,
                    "cache_read_input_tokens": 10_000,
                    "cache_creation_input_tokens": 2_000,
                    "output_tokens": 321,
                },
            },
            Usage(
                input_tokens=12_050,
                cached_input_tokens=10_000,
                cache_creation_tokens=2_000,
                output_tokens=321,
            ),
        ),
        (
            {"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": None},
            Usage(input_tokens=7, output_tokens=1),
        ),
    )
    overflow_errors = (
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 208310 tokens > 200000 maximum",
            },
        },
        ValueError("input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000"),
    )
    other_errors = (
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )

    def make_adapter(self) -> Adapter:
        return adapter()

    def validate(self, payload: dict[str, Any]) -> None:
        validator()(payload)

    def system_text(self, payload: dict[str, Any]) -> str:
        assert all(m["role"] != "system" for m in payload["messages"])
        return "".join(b["text"] for b in payload["system"])

    def roles(self, payload: dict[str, Any]) -> list[str]:
        return [m["role"] for m in payload["messages"]]

    def tool_events(self, payload: dict[str, Any]) -> list[ToolEvent]:
        events: list[ToolEvent] = []
        for i, m in enumerate(payload["messages"]):
            for b in m["content"]:
                if b["type"] == "tool_use":
                    events.append(("call", b["id"], i))
                elif b["type"] == "tool_result":
                    events.append(("result", b["tool_use_id"], i))
        return events

    def breakpoints(self, payload: dict[str, Any]) -> int:
        return len(breakpoints(payload))


LONG_HISTORY = tuple(
    Message.of("user" if i % 2 == 0 else "assistant", f"turn {i} " * 200) for i in range(6)
)


def test_breakpoints_sit_at_end_of_system_and_end_of_history() -> None:
    context = make_context(
        model="claude-sonnet-4-20250514",
        provider="anthropic",
        system="S" * 8000,
        history=LONG_HISTORY,
        system_tokens=2000,
        history_tokens=3000,
        current="NOW",
    )
    payload = adapter().build_request(context, {})
    assert payload["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    messages = payload["messages"]
    # the history ends with the assistant turn; the current message follows, uncached
    assert messages[-2]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert messages[-1] == {"role": "user", "content": [{"type": "text", "text": "NOW"}]}
    assert len(breakpoints(payload)) == 2


def test_history_breakpoint_before_current_when_merged_into_one_user_turn() -> None:
    history = (*LONG_HISTORY, Message.of("user", "LAST-HISTORY"))
    context = make_context(
        model="claude-sonnet-4",
        provider="anthropic",
        history=history,
        system_tokens=2000,
        history_tokens=3000,
        current="NOW",
    )
    last = adapter().build_request(context, {})["messages"][-1]
    assert last["content"] == [
        {
            "type": "text",
            "text": "LAST-HISTORY",
            "cache_control": {"type": "ephemeral", "ttl": "5m"},
        },
        {"type": "text", "text": "NOW"},
    ]


def test_minimum_cacheable_length_per_model() -> None:
    # system 700 tokens: below every minimum; system + history 1500: enough for Sonnet 4
    # (1024), not for Haiku 4.5 (4096)
    for model, expected in (("claude-sonnet-4-20250514", 1), ("claude-haiku-4-5", 0)):
        context = make_context(
            model=model,
            provider="anthropic",
            history=LONG_HISTORY,
            tools=(),
            system_tokens=700,
            history_tokens=800,
        )
        assert len(breakpoints(adapter().build_request(context, {}))) == expected, model
    # the system prompt reaches the minimum only with the tool definitions before it
    context = make_context(
        model="claude-sonnet-4",
        provider="anthropic",
        history=LONG_HISTORY,
        tools=(),
        system_tokens=1000,
        history_tokens=2000,
    )
    assert "cache_control" not in adapter().build_request(context, {})["system"][0]
    with_tools = make_context(
        model="claude-sonnet-4",
        provider="anthropic",
        history=LONG_HISTORY,
        system_tokens=1000,
        history_tokens=2000,
    )
    assert "cache_control" in adapter().build_request(with_tools, {})["system"][0]


def test_ttl_and_switches_from_settings_and_options() -> None:
    context = make_context(
        model="claude-sonnet-4",
        provider="anthropic",
        history=LONG_HISTORY,
        system_tokens=2000,
        history_tokens=3000,
    )
    hour = adapter(AnthropicSettings(cache_ttl="1h")).build_request(context, {})
    assert {c["ttl"] for c in breakpoints(hour)} == {"1h"}
    validator()(hour)
    assert breakpoints(adapter(AnthropicSettings(cache=False)).build_request(context, {})) == []
    assert breakpoints(adapter().build_request(context, {"cache": False})) == []


def test_model_info_and_date_suffix_normalisation() -> None:
    info = plugin.lamina_model_info("claude-sonnet-4-20250514", None)
    assert info is not None
    assert (info.name, info.context_window, info.max_output) == ("claude-sonnet-4", 200_000, 64_000)
    assert (info.provider, info.min_cache_prefix) == ("anthropic", 1024)
    haiku = plugin.lamina_model_info("anthropic/claude-3-5-haiku-20241022", None)
    assert haiku is not None and (haiku.max_output, haiku.min_cache_prefix) == (8192, 2048)
    assert plugin.lamina_model_info("gpt-4o", None) is None
    assert plugin.lamina_model_info("openai/claude-sonnet-4", None) is None


def test_overrides_in_settings_reach_the_request() -> None:
    settings = AnthropicSettings(
        models={"claude-sonnet-4": ModelOverride(max_output=1000, min_cache_prefix=100_000)}
    )
    context = make_context(
        model="claude-sonnet-4-20250514",
        provider="anthropic",
        history=LONG_HISTORY,
        system_tokens=2000,
        history_tokens=3000,
        max_tokens=50_000,
    )
    payload = adapter(settings).build_request(context, {})
    assert payload["max_tokens"] == 1000
    assert breakpoints(payload) == []


def test_max_tokens_defaults_to_the_reserved_reply() -> None:
    context = make_context(model="claude-sonnet-4", provider="anthropic")
    assert adapter().build_request(context, {})["max_tokens"] == 4096  # the budget's reserve
    assert adapter().build_request(context, {"max_tokens": 99})["max_tokens"] == 99


def test_estimate_is_flagged_and_calibrates() -> None:
    info = plugin.lamina_model_info("claude-sonnet-4", None)
    assert info is not None
    tok = plugin.lamina_tokenizer(model="claude-sonnet-4", info=info)
    assert tok is not None and tok.exact is False
    assert tok.count("x" * 350) == 100
    context = make_context(model="claude-sonnet-4", provider="anthropic")
    estimated = context.token_budget.used.total
    assert tok.revision == 0  # type: ignore[attr-defined]
    factor = tok.observe_usage(context, Usage(input_tokens=estimated * 2))  # type: ignore[attr-defined]
    assert factor == pytest.approx(2.0)  # counting low: the reported ratio at once
    assert tok.count("x" * 350) == 200
    assert tok.revision == 1  # type: ignore[attr-defined]  # the kernel forgets old counts


def test_tool_results_come_first_and_keep_error_flag() -> None:
    context = make_context(
        model="claude-sonnet-4", provider="anthropic", history=SCENARIOS["tool-round-trip"]
    )
    messages = adapter().build_request(context, {})["messages"]
    results = messages[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results] == ["call_1", "call_2"]
    assert results[0]["is_error"] is True and "is_error" not in results[1]
    assert json.loads(json.dumps(messages)) == messages


# -- on contexts the kernel assembles --------------------------------------------------

HISTORY = [
    Block.text(f"t{n}{r}", "session", f"turn {n} {r} " * 150, role=role, group=f"t{n}")
    for n in range(4)
    for r, role in (("u", "user"), ("a", "assistant"))
]


def test_assembled_context_with_settings_from_config() -> None:
    assembler = make_assembler(
        {
            "model": "claude-sonnet-4-20250514",
            "blocks": [{"id": "rules", "text": "Follow the house style. " * 200}],
            "plugins": {
                "anthropic": {
                    "cache_ttl": "1h",
                    "models": {"claude-sonnet-4": {"max_output": 2000}},
                }
            },
        },
        plugins=[("anthropic", plugin), ("turns", StaticProvider(HISTORY))],
    )
    context = assembler.assemble(assembler.request("What next?"))
    assert context.provider == "anthropic"
    assert context.report.tokenizer is not None and context.report.tokenizer.exact is False
    payload = assembler.payload(context)
    validator()(payload)
    assert payload["max_tokens"] == 2000  # override caps the 4096 reply reserve
    assert [b["ttl"] for b in breakpoints(payload)] == ["1h", "1h"]
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant"] * 4 + ["user"]
    assert "cache_control" in payload["messages"][-2]["content"][-1]


def test_unknown_setting_is_an_error_naming_the_key() -> None:
    with pytest.raises(LaminaError, match="cache_tll"):
        make_assembler(
            {"plugins": {"anthropic": {"cache_tll": "1h"}}}, plugins=[("anthropic", plugin)]
        )
    with pytest.raises(LaminaError, match="cache_ttl"):
        make_assembler(
            {"plugins": {"anthropic": {"cache_ttl": "2h"}}}, plugins=[("anthropic", plugin)]
        )


def test_inert_without_a_config_section() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assembler = make_assembler({"model": "gpt-4o"}, plugins=[("anthropic", plugin)])
        context = assembler.assemble(assembler.request("hi"))
    assert [b.id for b in context.report.blocks if b.plugin == "anthropic"] == []
    assert context.report.warnings == ()
    assert assembler.model("gpt-4o").info_plugin != "anthropic"


def test_the_planned_model_info_is_used_not_looked_up_again() -> None:
    """An assembled context carries the info the kernel planned with; the adapter uses it
    (here a max output no catalog has), and looks the model up only for other contexts."""
    from attrs import evolve

    from lamina import ModelInfo

    planned = ModelInfo(
        name="claude-sonnet-4", context_window=200_000, max_output=123, provider="anthropic"
    )
    context = make_context(model="claude-sonnet-4", provider="anthropic", max_tokens=50_000)
    assert adapter().build_request(context, {})["max_tokens"] == 50_000
    assert adapter().build_request(evolve(context, model_info=planned), {})["max_tokens"] == 123
    other = evolve(planned, provider=None)  # the kernel's fallback: not the adapter's own
    assert adapter().build_request(evolve(context, model_info=other), {})["max_tokens"] == 50_000

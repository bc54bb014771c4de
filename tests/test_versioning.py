"""The hook specs' stability promise (docs/versioning.md): a plugin written against Lamina
0.1's first public hook signatures still loads and works; specs only gain arguments, which
plugins opt into; deprecations reach plugin authors as pluggy warnings."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import lamina
import lamina.hookspecs
from lamina import Tool
from lamina.testing import make_assembler, make_plugin_manager

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "lamina_v01_plugin.py"

#: Lamina 0.1's hook specs as published: arguments and firstresult (written down by hand).
V0_1_SPECS: dict[str, tuple[tuple[str, ...], bool]] = {
    "lamina_settings_class": ((), False),
    "lamina_layers": (("config", "settings"), False),
    "lamina_layer_providers": (("config", "settings"), False),
    "lamina_tokenizer": (("model", "info"), True),
    "lamina_truncators": (("config", "settings"), False),
    "lamina_fit_strategies": (("config", "settings"), False),
    "lamina_formatters": (("config", "settings"), False),
    "lamina_model_info": (("model",), True),
    "lamina_summarizers": (("config", "settings"), False),
    "lamina_tool_filters": (("config", "settings"), False),
    "lamina_wrap_assembly": (("call",), True),
    "lamina_adapters": (("config", "settings"), False),
    "lamina_commands": (("cli",), False),
}

#: Names ``lamina`` exported in 0.1.
V0_1_EXPORTS = [
    "EVENT",
    "MEMORY",
    "PERSONA",
    "SESSION",
    "WORKSPACE",
    "Adapter",
    "AssembledContext",
    "Assembler",
    "AssemblyCall",
    "AssemblyReport",
    "AssemblyRequest",
    "Block",
    "BlockReport",
    "BudgetError",
    "BudgetUsage",
    "ConfigError",
    "Event",
    "FitStrategy",
    "Formatter",
    "HistoryCut",
    "ImagePart",
    "LaminaConfig",
    "LaminaError",
    "LaminaWarning",
    "LayerProvider",
    "LayerSpec",
    "Message",
    "ModelConfig",
    "ModelInfo",
    "Part",
    "PluginError",
    "Provenance",
    "ProviderContext",
    "ProviderError",
    "SerdeError",
    "Summarizer",
    "TextPart",
    "TokenBudget",
    "Tokenizer",
    "Tool",
    "ToolCallPart",
    "ToolFilter",
    "ToolResultPart",
    "Truncator",
    "Usage",
    "from_json",
    "hookimpl",
    "hookspec",
    "load_config",
    "structure",
    "to_json",
    "unstructure",
]


def load_v01():
    spec = importlib.util.spec_from_file_location("lamina_v01_plugin", FIXTURE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def current_specs():
    return {
        name: (tuple(inspect.signature(fn).parameters), fn.lamina_spec["firstresult"])
        for name, fn in vars(lamina.hookspecs).items()
        if name.startswith("lamina_") and hasattr(fn, "lamina_spec")
    }


@pytest.mark.parametrize("hook", sorted(V0_1_SPECS))
def test_spec_keeps_its_0_1_arguments_and_kind(hook):
    specs = current_specs()
    assert hook in specs, f"hook {hook} was removed; 0.1 plugins implement it"
    args, firstresult = specs[hook]
    old_args, old_firstresult = V0_1_SPECS[hook]
    missing = set(old_args) - set(args)
    assert not missing, f"{hook} lost arguments {sorted(missing)} that 0.1 plugins take"
    assert firstresult == old_firstresult, f"{hook} changed between firstresult and collection"


def test_0_1_public_names_are_still_exported():
    missing = [n for n in V0_1_EXPORTS if n not in lamina.__all__ or not hasattr(lamina, n)]
    assert not missing


def _added_in_0_2() -> str:
    text = (ROOT / "docs" / "versioning.md").read_text(encoding="utf-8")
    return text.split("## Added in 0.2", 1)[1].split("\n## ", 1)[0]


def test_every_name_and_hook_added_since_0_1_is_documented():
    section = _added_in_0_2()
    added = sorted(set(lamina.__all__) - set(V0_1_EXPORTS)) + sorted(
        set(current_specs()) - set(V0_1_SPECS)
    )
    undocumented = [n for n in added if f"`{n}`" not in section]
    assert not undocumented, f"add these to docs/versioning.md 'Added in 0.2': {undocumented}"


def test_0_1_plugin_validates_against_the_current_specs():
    pm = make_plugin_manager(("v01", load_v01()))
    hooks = {h.name for h in pm.get_hookcallers(pm.get_plugin("v01"))}
    assert hooks == set(V0_1_SPECS)


def test_0_1_plugin_still_works_end_to_end():
    config = {
        "model": "v01-model",
        "fit": {"strategy": "v01-all", "summarizer": "v01-first-line"},
        "format": {"event": "v01-json"},
        "plugins": {"v01": {"greeting": "still here"}},
    }
    v01 = load_v01()
    with make_assembler(config, plugins=[("v01", v01)]) as a:
        request = a.request("hi", tools=(Tool(name="shell"), Tool(name="search")))
        ctx = a.assemble(request)
        payload = a.payload(ctx, provider="v01-echo")
        usage = a.adapter("v01-echo").parse_usage({"in": 12})
        assert a.model("v01-model").tokenizer.name == "v01-chars"
    assert ctx.report.tokenizer.name == "v01-chars"  # lamina_tokenizer(model, info)
    assert ctx.token_budget.model_limit == 2000  # lamina_model_info(model)
    assert '{"id": "v01:greeting", "text": "still here"}' in ctx.current_message.text
    assert [t.name for t in ctx.tools] == ["search"]  # the tool filter
    assert ctx.source_event_id == "v01-wrapped"  # the wrapper
    assert payload["message"] == ctx.current_message.text and usage.input_tokens == 12


def test_0_1_plugin_command_still_registers():
    cli = click.Group()
    make_plugin_manager(("v01", load_v01())).hook.lamina_commands(cli=cli)
    assert CliRunner().invoke(cli, ["v01-hello"]).output == "hello from 0.1\n"


# -- deprecations go through pluggy ------------------------------------------------------------


class UsesConfig:
    @lamina.hookimpl
    def lamina_layer_providers(self, config):
        return []


class UsesNothing:
    @lamina.hookimpl
    def lamina_layer_providers(self):
        return []


def test_deprecated_argument_warns_plugins_that_take_it(monkeypatch):
    spec = lamina.hookspecs.lamina_layer_providers.lamina_spec
    warning = DeprecationWarning("lamina_layer_providers(config) is deprecated; use ctx.config")
    monkeypatch.setitem(spec, "warn_on_impl_args", {"config": warning})
    with pytest.warns(DeprecationWarning, match=r"lamina_layer_providers\(config\) is deprecated"):
        make_assembler({}, plugins=[("old", UsesConfig())])
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        make_assembler({}, plugins=[("new", UsesNothing())])  # no warning for the others


def test_deprecated_hook_warns_its_implementers(monkeypatch):
    spec = lamina.hookspecs.lamina_layer_providers.lamina_spec
    monkeypatch.setitem(spec, "warn_on_impl", DeprecationWarning("lamina_layer_providers is going"))
    with pytest.warns(DeprecationWarning, match="lamina_layer_providers is going"):
        make_assembler({}, plugins=[("old", UsesNothing())])

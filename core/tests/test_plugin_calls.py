"""The kernel's side of the hook contract: every hook call goes through pluggy (so monitoring
and tracing see it), records are attributed to their plugin, "inert without a config section"
is declared once, and a wrapper sees the call's request, overrides, config and a read-only
view of the kernel, never the engine."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import attrs
import pytest

import lamina
from lamina.plugins import LaminaPluginManager
from lamina.plugins import _host as host_module
from lamina.testing import FAKE_MODEL, FakeModel, StaticProvider, make_assembler

KERNEL_CALLED = {
    "lamina_settings_class",
    "lamina_layers",
    "lamina_layer_providers",
    "lamina_truncators",
    "lamina_fit_strategies",
    "lamina_formatters",
    "lamina_summarizers",
    "lamina_tool_filters",
    "lamina_adapters",
    "lamina_block_transforms",
    "lamina_model_info",
    "lamina_tokenizer",
    "lamina_wrap_assembly",
}


class Everything:
    """Implements the hooks no built-in does, so each is called."""

    @lamina.hookimpl
    def lamina_settings_class(self):
        return None

    @lamina.hookimpl
    def lamina_block_transforms(self):
        return [lamina.BlockTransform(name="same", transform=lambda block, ctx: block)]

    @lamina.hookimpl
    def lamina_adapters(self):
        return []

    @lamina.hookimpl
    def lamina_summarizers(self):
        return []


def test_hookcall_monitoring_sees_every_hook_the_kernel_calls(monkeypatch):
    seen: list[tuple[str, tuple[str, ...]]] = []

    class Monitored(LaminaPluginManager):
        def __init__(self) -> None:
            super().__init__()
            self.add_hookcall_monitoring(
                lambda name, impls, kwargs: seen.append(
                    (name, tuple(i.plugin_name for i in impls))
                ),
                lambda outcome, name, impls, kwargs: None,
            )

    monkeypatch.setattr(host_module, "LaminaPluginManager", Monitored)
    a = make_assembler(
        {"model": FAKE_MODEL}, plugins=[("fake", FakeModel()), ("all", Everything())]
    )
    a.assemble(a.request("hi"))
    assert {name for name, _ in seen} >= KERNEL_CALLED
    # Collection hooks are asked one plugin at a time, so each answer has one author.
    layer_calls = [impls for name, impls in seen if name == "lamina_layers"]
    assert layer_calls and all(len(impls) == 1 for impls in layer_calls)


def test_lamina_trace_plugins_prints_every_hook_call():
    script = textwrap.dedent(
        """
        from lamina.testing import make_assembler
        a = make_assembler({"model": "gpt-4o"})
        a.assemble(a.request("hi"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "LAMINA_TRACE_PLUGINS": "1"},
        timeout=120,
        check=True,
    )
    for hook in ("lamina_layers", "lamina_model_info", "lamina_tokenizer", "lamina_wrap_assembly"):
        assert hook in done.stderr


def test_records_are_attributed_to_the_plugin_that_returned_them():
    a = make_assembler(plugins=[("mine", StaticProvider([], name="mine-provider"))])
    [provider] = [p for p in a.registry.providers if p.record.name == "mine-provider"]
    assert provider.plugin == "mine"
    assert a.registry.layers["session"].plugin == "layers"


def test_an_implementation_that_raises_is_a_plugin_error_naming_it():
    class Broken:
        @lamina.hookimpl
        def lamina_layers(self):
            raise RuntimeError("boom")

    with pytest.raises(lamina.PluginError, match="boom") as caught:
        make_assembler(plugins=[("broken", Broken())])
    assert caught.value.plugin == "broken"


@lamina.inert_without_section
@attrs.frozen(kw_only=True)
class QuietSettings:
    note: str = "hello"


class Quiet:
    """A plugin that declares itself inert without ``[plugins.quiet]``."""

    def __init__(self) -> None:
        self.wrapped = 0
        self.asked = 0

    @lamina.hookimpl
    def lamina_settings_class(self):
        return QuietSettings

    @lamina.hookimpl
    def lamina_layer_providers(self, settings):
        self.asked += 1

        def provide(ctx):
            yield lamina.Block.text("quiet:note", "memory", settings.note)

        return [lamina.LayerProvider(name="quiet", provide=provide)]

    @lamina.hookimpl(wrapper=True)
    def lamina_wrap_assembly(self, call):
        self.wrapped += 1
        return (yield)


@pytest.mark.parametrize(
    ("sections", "blocks", "wrapped"),
    [({}, 0, 0), ({"plugins": {"quiet": {"note": "configured"}}}, 1, 1)],
    ids=["no-section", "section"],
)
def test_a_plugin_inert_without_its_section_supplies_nothing_until_configured(
    sections, blocks, wrapped
):
    plugin = Quiet()
    a = make_assembler(sections, plugins=[("quiet", plugin)])
    ctx = a.assemble(a.request("hi"))
    assert sum(1 for b in ctx.report.blocks if b.id == "quiet:note") == blocks
    assert plugin.wrapped == wrapped
    assert plugin.asked == blocks  # an inert plugin's hooks are not even called


def test_a_wrapper_sees_config_settings_model_and_strategies_but_not_the_engine():
    seen = {}

    @attrs.frozen(kw_only=True)
    class Settings:
        level: int = 3

    class Peek:
        @lamina.hookimpl
        def lamina_settings_class(self):
            return Settings

        @lamina.hookimpl(wrapper=True)
        def lamina_wrap_assembly(self, call):
            seen["settings"] = call.settings("peek")
            seen["window"] = call.model_info().context_window
            seen["strategies"] = sorted(call.kernel.strategies)
            seen["config"] = call.config
            call.overrides = attrs.evolve(call.overrides, strategy="stopAtLimit")
            result = yield
            return result

    a = make_assembler({"model": FAKE_MODEL}, plugins=[("fake", FakeModel()), ("peek", Peek())])
    ctx = a.assemble(a.request("hi"))
    assert seen["settings"] == Settings()
    assert seen["window"] == 4096
    assert {"truncateMiddle", "rollingWindow", "stopAtLimit"} <= set(seen["strategies"])
    assert seen["config"] is a.config
    assert ctx.report.strategy == "stopAtLimit"
    with pytest.raises(TypeError):
        a.kernel.settings["peek"] = None  # type: ignore[index]


def test_call_assembler_still_works_with_a_deprecation_warning():
    found = []

    class Old:
        @lamina.hookimpl(wrapper=True)
        def lamina_wrap_assembly(self, call):
            found.append(call.assembler)
            return (yield)

    a = make_assembler(plugins=[("old", Old())])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a.assemble(a.request("hi"))
    assert found == [a]
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_the_0_1_override_attributes_read_and_write_the_overrides_record():
    call = lamina.AssemblyCall(
        request=make_assembler().request("hi"),
        config=lamina.LaminaConfig(),
        kernel=make_assembler().kernel,
    )
    call.strategy, call.minimum_recent, call.reserve_response = "stopAtLimit", 2, 100
    assert call.overrides == lamina.Overrides(
        strategy="stopAtLimit", minimum_recent=2, reserve_response=100
    )


def test_providers_see_each_layers_effective_placement_formatter_and_cap():
    views = {}

    def provide(ctx):
        views["memory"] = ctx.layer("memory")
        views["session"] = ctx.layer("session")
        return []

    config = {"layers": {"memory": {"max_tokens": 300}}, "placement": {"memory": "system"}}
    a = make_assembler(config, plugins=[("spy", StaticProvider(provide))])
    a.assemble(a.request("hi", max_tokens=4000))
    memory = views["memory"]
    assert (memory.placement, memory.cap) == ("system", 300)
    assert memory.formatter.name == a.config.format.system
    assert views["session"].placement == "history" and views["session"].cap is None


@pytest.mark.parametrize(("counted_by", "trusted"), [("fake-words", True), ("other", False)])
def test_a_stored_count_is_trusted_only_from_the_tokenizer_that_made_it(counted_by, trusted):
    text = "one two three four five"  # 9 fake-words tokens
    block = lamina.Block.text(
        "h", "session", text, role="user", token_count=1, counted_by=counted_by
    )
    a = make_assembler(
        {"model": FAKE_MODEL}, plugins=[("fake", FakeModel()), ("h", StaticProvider([block]))]
    )
    [report] = [b for b in a.assemble(a.request("hi")).report.blocks if b.id == "h"]
    assert (report.tokens == 1) is trusted


def test_the_context_carries_the_model_info_it_was_planned_with_but_not_in_json():
    a = make_assembler({"model": FAKE_MODEL}, plugins=[("fake", FakeModel(context_window=5000))])
    ctx = a.assemble(a.request("hi"))
    assert ctx.model_info is a.model(FAKE_MODEL).info
    assert ctx.model_info.context_window == 5000
    assert "model_info" not in lamina.to_json(ctx)
    assert lamina.from_json(lamina.to_json(ctx), lamina.AssembledContext).model_info is None

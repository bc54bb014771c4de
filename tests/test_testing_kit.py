"""The plugin authors' kit: fake tokenizer and model, plugin manager, workspace fixtures and
the conformance suites (run on the kernel's own tokenizers, truncators and formatters, and
shown to fail on broken ones)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

import pluggy
import pytest

import lamina
from lamina import Block, Formatter, LayerProvider, Truncator
from lamina.formatting import unescape_xml_text
from lamina.testing import FAKE_MODEL, FakeModel, FakeTokenizer, StaticProvider, Workspace
from lamina.testing.conformance import (
    FormatterConformance,
    LayerProviderConformance,
    TokenizerConformance,
    TruncatorConformance,
)

# -- the fakes and fixtures -----------------------------------------------------------------


def test_fake_tokenizer_counts_words_blanks_and_marks():
    tok = FakeTokenizer()
    assert tok.count("Hello, world!") == 5  # Hello | , | ␠ | world | !
    assert tok.boundaries("Hello, world!") == [0, 5, 6, 7, 12]
    assert tok.count("a  b") == 3 and tok.exact


def test_fake_model_budgets_with_the_fake_tokenizer(lamina_assembler, lamina_fake_model):
    a = lamina_assembler({"model": FAKE_MODEL}, plugins=[("fake", lamina_fake_model)])
    model = a.model(FAKE_MODEL)
    assert model.info.context_window == 4096 and model.tokenizer.name == "fake-words"
    ctx = a.assemble(a.request("hi"))
    assert ctx.token_budget.model_limit == 4096
    assert ctx.report.tokenizer.name == "fake-words" and ctx.report.tokenizer.exact


def test_plugin_manager_holds_only_the_given_plugins(lamina_plugin_manager):
    pm = lamina_plugin_manager(("fake", FakeModel()))
    assert [name for name, _ in pm.list_name_plugin()] == ["fake"]
    [impl] = pm.hook.lamina_model_info.get_hookimpls()
    assert impl.plugin_name == "fake"
    assert impl.function(model=FAKE_MODEL).context_window == 4096


def test_plugin_manager_rejects_a_misspelt_argument(lamina_plugin_manager):
    class Bad:
        @lamina.hookimpl
        def lamina_layer_providers(self, setings):  # typo: not an argument of the spec
            return []

    with pytest.raises(pluggy.PluginValidationError, match="setings"):
        lamina_plugin_manager(Bad())


def test_plugin_manager_rejects_an_unknown_hook(lamina_plugin_manager):
    class Bad:
        @lamina.hookimpl
        def lamina_layer_provider(self):  # not a hook
            return []

    with pytest.raises(pluggy.PluginValidationError, match="lamina_layer_provider"):
        lamina_plugin_manager(Bad())


def test_workspace_fixture_is_the_current_folder_and_isolated(lamina_workspace):
    assert Path.cwd() == lamina_workspace.root
    import os

    assert os.environ["LAMINA_PLUGINS"] == ""
    lamina_workspace.write("notes/a.md", "remember")
    lamina_workspace.config(
        'model = "gpt-4"\n[[blocks]]\nid = "rule"\nlayer = "workspace"\n'
        'text = "Be brief."\ntrusted = true\n'
    )
    with lamina_workspace.assembler() as a:
        assert a.config.path == str(lamina_workspace.config_path)
        ctx = a.assemble(a.request("hi"))
    assert "Be brief." in ctx.system_prompt
    assert (lamina_workspace.root / "notes" / "a.md").read_text() == "remember"


def test_fake_provider_fixture(lamina_assembler, lamina_fake_provider):
    provider = lamina_fake_provider([Block.text("m:1", "memory", "The user likes tea.")])
    a = lamina_assembler({}, plugins=[("mem", provider)])
    ctx = a.assemble(a.request("hi"))
    assert [(b.id, b.plugin, b.status) for b in ctx.report.blocks if b.plugin == "mem"] == [
        ("m:1", "mem", "kept")
    ]


# -- conformance on the kernel's own records -------------------------------------------------


class TestFakeTokenizerConforms(TokenizerConformance):
    samples: ClassVar[dict[str, int]] = {"Hello, world!": 5, "a<b": 3, "": 0}

    def make_tokenizer(self):
        return FakeTokenizer()


class TestTiktokenConforms(TokenizerConformance):
    samples: ClassVar[dict[str, int]] = {"Hello, world!": 4}  # Hello | , | ␠world | !

    def make_tokenizer(self):
        from lamina.tokens import TiktokenTokenizer

        return TiktokenTokenizer("cl100k_base")


def _truncator_suite(name: str, refuses: bool = False) -> type:
    from lamina import truncation

    func = getattr(truncation, f"truncate_{name}")

    class Suite(TruncatorConformance):
        def make_truncator(self):
            return Truncator(name=name, truncate=func)

    Suite.refuses = refuses
    return Suite


TestEndTruncatorConforms = _truncator_suite("end")
TestStartTruncatorConforms = _truncator_suite("start")
TestMiddleTruncatorConforms = _truncator_suite("middle")
TestNeverTruncatorConforms = _truncator_suite("never", refuses=True)

XML_BODY = re.compile(r"\A<(?P<tag>[\w.-]+)(?: [^>]*)?>\n(?P<body>.*)\n</(?P=tag)>\Z", re.S)


class TestXmlFormatterConforms(FormatterConformance):
    def make_formatter(self):
        from lamina.builtins.formatters_plugin import render_xml

        return Formatter(name="xml", render=render_xml)

    def parse_body(self, rendered, block):
        match = XML_BODY.match(rendered)
        assert match, f"not one element: {rendered!r}"
        inner = match["body"]
        assert f"</{match['tag']}>" not in inner, "the body closes the element"
        return unescape_xml_text(inner)


class TestMarkdownFormatterConforms(FormatterConformance):
    def make_formatter(self):
        from lamina.builtins.formatters_plugin import render_markdown

        return Formatter(name="markdown", render=render_markdown)

    def parse_body(self, rendered, block):
        if rendered.startswith("## "):
            heading, _, rendered = rendered.partition("\n\n")
            assert "\n" not in heading, "the heading spans lines"
        fence = re.match(r"`{3,}", rendered)[0]
        assert rendered.startswith(fence + "\n") and rendered.endswith("\n" + fence)
        inner = rendered[len(fence) + 1 : -len(fence) - 1]
        assert fence not in inner, "the body closes the fence"
        return inner


# -- the suites catch broken implementations --------------------------------------------------


class BrokenTokenizer:
    """Claims one token per character but reports a boundary per word."""

    name, exact = "broken", True

    def count(self, text):
        return len(text)

    def boundaries(self, text):
        return [m.start() for m in re.finditer(r"\S+", text)]


class BrokenTokenizerSuite(TokenizerConformance):
    def make_tokenizer(self):
        return BrokenTokenizer()


class OverlongTruncatorSuite(TruncatorConformance):
    """Cuts by characters, ignoring tokens: results can exceed the limit."""

    def make_truncator(self):
        return Truncator(name="chars", truncate=lambda text, n, tok: text[: n * 8])


class RawFormatterSuite(FormatterConformance):
    """Puts untrusted bodies into tags unescaped."""

    def make_formatter(self):
        return Formatter(name="raw", render=lambda b: f"<context>\n{b.body}\n</context>")

    parse_body = TestXmlFormatterConforms.parse_body


def test_tokenizer_suite_fails_a_miscounting_tokenizer():
    with pytest.raises(AssertionError, match="boundaries but count"):
        BrokenTokenizerSuite().test_hostile_texts()


def test_truncator_suite_fails_a_truncator_that_overshoots():
    with pytest.raises(AssertionError, match="limit"):
        OverlongTruncatorSuite().test_result_fits()


def test_formatter_suite_fails_a_formatter_that_does_not_escape():
    with pytest.raises(AssertionError, match="closes the element"):
        RawFormatterSuite().test_hostile_content_reads_back()


# -- layer-provider conformance ----------------------------------------------------------------


class Notes:
    """A small well-behaved provider plugin: one memory block per *.md file in a folder."""

    import attrs as _attrs

    @_attrs.frozen(kw_only=True)
    class Settings:
        folder: str = "notes"

    @lamina.hookimpl
    def lamina_settings_class(self):
        return self.Settings

    @lamina.hookimpl
    def lamina_layer_providers(self, config):
        if "notes" not in config.sections:
            return []

        def provide(ctx):
            for path in sorted(ctx.config.resolve(ctx.settings.folder).glob("*.md")):
                yield Block.text(f"notes:{path.name}", "memory", path.read_text(), title=path.stem)

        return [LayerProvider(name="notes", provide=provide, layers=("memory",))]


class TestNotesProviderConforms(LayerProviderConformance):
    plugin_name = "notes"

    def make_plugin(self):
        return Notes()

    def configure(self, workspace):
        (workspace / "notes").mkdir()
        (workspace / "notes" / "tea.md").write_text("The user likes </context> tea.")
        return {"plugins": {"notes": {"folder": "notes"}}}


class NoisyNotes(Notes):
    """Yields a trusted block even with no config section."""

    @lamina.hookimpl
    def lamina_layer_providers(self, config):
        def provide(ctx):
            yield Block.text("noisy", "memory", "always here", trusted=True)

        return [LayerProvider(name="noisy", provide=provide)]


class NoisySuite(TestNotesProviderConforms):
    def make_plugin(self):
        return NoisyNotes()


def test_provider_suite_fails_a_plugin_that_acts_without_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="blocks without a config section"):
        NoisySuite().test_inert_without_config(tmp_path)


def test_provider_suite_fails_a_plugin_that_trusts_data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(AssertionError, match="trusted=True"):
        NoisySuite().test_config_yields_valid_blocks(tmp_path)


def test_static_provider_is_public_kit():
    assert StaticProvider and Workspace  # re-exported names stay importable

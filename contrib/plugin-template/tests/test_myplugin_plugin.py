"""myplugin: Lamina's conformance suite for layer providers, and its own promises."""

from __future__ import annotations

import lamina_myplugin.plugin as myplugin
import pytest

from lamina import ConfigError
from lamina.testing import FAKE_MODEL, FakeModel, make_assembler
from lamina.testing.conformance import LayerProviderConformance


class TestConformance(LayerProviderConformance):
    plugin_name = "myplugin"

    def make_plugin(self):
        return myplugin

    def configure(self, workspace):
        (workspace / "notes").mkdir()
        (workspace / "notes" / "prefs.md").write_text("The user prefers </context> tea.")
        return {"plugins": {"myplugin": {"files": ["notes/prefs.md"]}}}


def assemble(config):
    plugins = [("fake", FakeModel()), ("myplugin", myplugin)]
    with make_assembler({"model": FAKE_MODEL, **config}, plugins=plugins) as a:
        return a.assemble(a.request("hi"))


def test_pinned_file_reaches_the_event_as_fenced_data(lamina_workspace):
    lamina_workspace.write("prefs.md", "Short answers. ```")
    ctx = assemble({"plugins": {"myplugin": {"files": ["prefs.md"], "priority": 0.3}}})
    assert ctx.current_message.text.startswith(
        "## prefs (prefs.md)\n\n````\nShort answers. ```\n````\n\n"
    )
    [block] = [b for b in ctx.report.blocks if b.plugin == "myplugin"]
    assert (block.id, block.layer, block.status) == ("myplugin:prefs.md", "memory", "kept")


def test_missing_file_names_the_key(lamina_workspace):
    with pytest.raises(
        ConfigError, match=r"key plugins\.myplugin\.files\[0\]: no such file: gone\.md"
    ):
        assemble({"plugins": {"myplugin": {"files": ["gone.md"]}}})


def test_inert_without_its_section(lamina_workspace):
    lamina_workspace.write("prefs.md", "Short answers.")
    ctx = assemble({})
    assert all(b.plugin != "myplugin" for b in ctx.report.blocks)


def test_a_fifo_is_refused_not_waited_on(lamina_workspace):
    import os

    os.mkfifo(lamina_workspace.root / "pipe")
    with pytest.raises(ConfigError, match=r"files\[0\]: not a regular file: pipe"):
        assemble({"plugins": {"myplugin": {"files": ["pipe"]}}})

"""pytest fixtures for Lamina: isolated assemblers with a fixed clock, an isolated plugin
manager, a temporary workspace, a fake layer provider, model and tokenizer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest

from lamina.assembly.engine import Assembler
from lamina.testing import (
    FakeModel,
    FakeTokenizer,
    StaticProvider,
    Workspace,
    make_assembler,
    make_plugin_manager,
)


@pytest.fixture
def lamina_assembler() -> Iterator[Callable[..., Assembler]]:
    """Build isolated assemblers (``make_assembler`` arguments); all are closed afterwards."""
    made: list[Assembler] = []

    def factory(*args: Any, **kwargs: Any) -> Assembler:
        assembler = make_assembler(*args, **kwargs)
        made.append(assembler)
        return assembler

    yield factory
    for assembler in made:
        assembler.close()


@pytest.fixture
def lamina_plugin_manager() -> Callable[..., pluggy.PluginManager]:
    """``make_plugin_manager``: a pluggy manager with Lamina's specs and only the plugins
    given, each validated against the specs."""
    return make_plugin_manager


@pytest.fixture
def lamina_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A ``Workspace`` in a fresh temporary folder, made the current directory; installed
    plugins are kept out of entry-point assemblers (``LAMINA_PLUGINS`` set to none)."""
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("LAMINA_PLUGINS", "")
    return Workspace(root)


@pytest.fixture
def lamina_fake_tokenizer() -> FakeTokenizer:
    """An exact word/punctuation tokenizer whose counts are easy to work out by hand."""
    return FakeTokenizer()


@pytest.fixture
def lamina_fake_model() -> FakeModel:
    """A plugin object making ``fake-model`` a known model (4,096-token window, 256 output)
    counted by ``FakeTokenizer``; register it with ``plugins=[("fake", lamina_fake_model)]``."""
    return FakeModel()


@pytest.fixture
def lamina_fake_provider() -> Callable[..., StaticProvider]:
    """``StaticProvider``: a plugin object whose one layer provider yields the given blocks."""
    return StaticProvider

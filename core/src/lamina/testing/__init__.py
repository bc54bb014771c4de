"""Helpers for testing Lamina and plugins written for it (also a pytest plugin: see
``lamina.testing.pytest_plugin``; conformance suites in ``lamina.testing.conformance``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lamina.assembly.engine import Assembler
from lamina.config import LaminaConfig, load_config, parse_config
from lamina.hookspecs import hookimpl
from lamina.model.blocks import Block
from lamina.records import LayerProvider, ModelInfo, ProviderContext, Tokenizer

if TYPE_CHECKING:
    import pluggy

__all__ = [
    "FAKE_MODEL",
    "FIXED_NOW",
    "FakeModel",
    "FakeTokenizer",
    "StaticProvider",
    "Workspace",
    "make_assembler",
    "make_plugin_manager",
]

#: The clock isolated assemblers use, so output is reproducible.
FIXED_NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def make_assembler(
    config: LaminaConfig | dict[str, Any] | None = None,
    *,
    plugins: Sequence[tuple[str, object]] = (),
    entry_points: bool = False,
    now: datetime = FIXED_NOW,
) -> Assembler:
    """An assembler isolated from installed plugins (unless ``entry_points``) with a fixed clock."""
    if isinstance(config, dict):
        config = parse_config(config, file=None)
    return Assembler(config, plugins=plugins, entry_points=entry_points, clock=lambda: now)


class StaticProvider:
    """A plugin object whose one layer provider yields the given blocks (or a function's)."""

    def __init__(
        self,
        blocks: Iterable[Block] | Callable[[ProviderContext], Iterable[Block]],
        *,
        name: str = "fixture",
        required: bool = False,
        timeout: float | None = None,
    ) -> None:
        self.blocks = blocks
        self.name, self.required, self.timeout = name, required, timeout

    def _provide(self, ctx: ProviderContext) -> Iterable[Block]:
        return self.blocks(ctx) if callable(self.blocks) else list(self.blocks)

    @hookimpl
    def lamina_layer_providers(self) -> list[LayerProvider]:
        return [
            LayerProvider(
                name=self.name, provide=self._provide, required=self.required, timeout=self.timeout
            )
        ]


# A token is a run of word characters, a run of blanks, or any other single character.
_FAKE_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")


class FakeTokenizer:
    """An exact, dependency-free tokenizer for tests: a token is a run of word characters, a
    run of whitespace, or one other character. Counts are easy to work out by hand
    (``"Hello, world!"`` is 5 tokens) and, as with BPE, joining texts can merge tokens."""

    name = "fake-words"
    exact = True

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return sum(1 for _ in _FAKE_TOKEN.finditer(text))

    def boundaries(self, text: str) -> list[int]:
        """The character offset where each token starts."""
        return [m.start() for m in _FAKE_TOKEN.finditer(text)]


#: The model name ``FakeModel`` answers for.
FAKE_MODEL = "fake-model"


class FakeModel:
    """A plugin object that makes ``model`` a known model counted by ``FakeTokenizer``, with a
    small context window, so budget tests can be worked out by hand."""

    def __init__(
        self, *, model: str = FAKE_MODEL, context_window: int = 4096, max_output: int = 256
    ) -> None:
        self.model = model
        self.info = ModelInfo(
            name=model, context_window=context_window, max_output=max_output, provider="fake"
        )

    @hookimpl
    def lamina_model_info(self, model: str) -> ModelInfo | None:
        return self.info if model == self.model else None

    @hookimpl
    def lamina_tokenizer(self, model: str) -> Tokenizer | None:
        return FakeTokenizer() if model == self.model else None


def make_plugin_manager(*plugins: object | tuple[str, object]) -> pluggy.PluginManager:
    """A pluggy manager holding Lamina's hook specs and only ``plugins`` (objects or
    ``(name, object)`` pairs): registering validates every hook implementation against its
    spec (name and arguments), raising ``pluggy.PluginValidationError`` for a bad one."""
    import pluggy

    from lamina import hookspecs

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for plugin in plugins:
        if isinstance(plugin, tuple):
            pm.register(plugin[1], name=plugin[0])
        else:
            pm.register(plugin)
    pm.check_pending()
    return pm


class Workspace:
    """A temporary workspace folder: write files and a ``lamina.toml`` into it, then build
    isolated assemblers from that config (paths in it resolve against the folder)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def config_path(self) -> Path:
        return self.root / "lamina.toml"

    def write(self, relative: str, text: str) -> Path:
        """Write ``text`` (UTF-8) to ``relative`` inside the workspace, making folders."""
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def config(self, toml: str) -> Path:
        """Write ``lamina.toml``."""
        return self.write("lamina.toml", toml)

    def assembler(
        self,
        *,
        plugins: Sequence[tuple[str, object]] = (),
        entry_points: bool = False,
        now: datetime = FIXED_NOW,
    ) -> Assembler:
        """An assembler for the workspace's ``lamina.toml`` (defaults when there is none)."""
        path = self.config_path if self.config_path.is_file() else None
        config = load_config(path) if path else parse_config({}, file=None)
        return make_assembler(config, plugins=plugins, entry_points=entry_points, now=now)

"""Helpers for testing Lamina and plugins written for it (also a pytest plugin: see
``lamina.testing.pytest_plugin``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from lamina.config import LaminaConfig, parse_config
from lamina.hookspecs import hookimpl
from lamina.model.blocks import Block
from lamina.pipeline import Assembler
from lamina.records import LayerProvider, ProviderContext

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

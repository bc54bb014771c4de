"""Hook implementations: the ``memory`` layer provider and its settings. A failing optional
source drops out with a warning in the assembly report (``ProviderContext.warn``).

Without a ``[plugins.memory]`` section the plugin is inert: its settings class says so
(``lamina.inert_without_section``) and the kernel skips its provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lamina import MEMORY, Block, LaminaConfig, LayerProvider, ProviderContext, hookimpl
from lamina_memory.settings import Settings

if TYPE_CHECKING:  # imported when a config has [plugins.memory], so others start faster
    from lamina_memory.service import MemoryService

#: The service of the most recent assembler per config path, for hosts that write memories.
SERVICES: dict[str | None, MemoryService] = {}


def service_for(config: LaminaConfig) -> MemoryService | None:
    """The memory service built for ``config``'s file (``None`` if none was built)."""
    return SERVICES.get(config.path)


@hookimpl
def lamina_settings_class() -> type:
    return Settings


@hookimpl
def lamina_layer_providers(config: LaminaConfig, settings: Settings) -> Iterable[LayerProvider]:
    """One optional provider for the memory layer (the kernel calls this only when
    ``[plugins.memory]`` exists)."""
    from lamina_memory.service import MemoryService

    service = MemoryService(settings, config)
    SERVICES[config.path] = service

    def provide(ctx: ProviderContext) -> list[Block]:
        blocks, warnings = service.blocks(ctx)
        for warning in warnings:
            ctx.warn(warning)
        return blocks

    return [
        LayerProvider(
            name="memory",
            provide=provide,
            layers=(MEMORY,),
            description="Events, chunks, entities, relations and patterns within a token budget.",
        )
    ]


@hookimpl
def lamina_commands(cli: Any) -> None:
    """``lamina memory import FILE…`` and ``lamina memory stats``."""
    from lamina_memory.cli import memory_group

    cli.add_command(memory_group)

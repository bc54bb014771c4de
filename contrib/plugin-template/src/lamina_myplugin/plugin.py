"""Hook implementations of ``myplugin``: its settings class and one layer provider.

The settings class is marked ``inert_without_section``: without ``[plugins.myplugin]`` in the
config the kernel leaves the plugin's provider out, so no hook needs to check for it."""

from __future__ import annotations

from collections.abc import Iterator

import attrs

import lamina
from lamina import Block, ConfigError, LayerProvider, Provenance, ProviderContext

NAME = "myplugin"


@lamina.inert_without_section
@attrs.frozen(kw_only=True)
class Settings:
    """``[plugins.myplugin]`` in lamina.toml."""

    files: tuple[str, ...] = ()
    priority: float = attrs.field(
        default=0.5, validator=[attrs.validators.ge(0), attrs.validators.le(1)]
    )
    max_tokens: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.gt(0))
    )


def provide(ctx: ProviderContext) -> Iterator[Block]:
    """One untrusted memory block per pinned file, in the order listed."""
    settings: Settings = ctx.settings
    for i, name in enumerate(settings.files):
        path = ctx.config.resolve(name)
        key = ctx.config.key(f"plugins.{NAME}.files[{i}]")
        if path.exists() and not path.is_file():  # a folder, a FIFO (reading it would block)
            raise ConfigError(f"not a regular file: {name}", file=ctx.config.where, key=key)
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            raise ConfigError(f"no such file: {name}", file=ctx.config.where, key=key) from None
        except UnicodeDecodeError:
            raise ConfigError(f"not UTF-8 text: {name}", file=ctx.config.where, key=key) from None
        yield Block.text(
            f"{NAME}:{name}",
            "memory",
            text,
            title=path.stem,
            priority=settings.priority,
            max_tokens=settings.max_tokens,
            truncation="end",
            provenance=Provenance(source_id=name, path=name),
        )


@lamina.hookimpl
def lamina_settings_class() -> type:
    return Settings


@lamina.hookimpl
def lamina_layer_providers() -> list[LayerProvider]:
    return [LayerProvider(name=NAME, provide=provide, layers=("memory",), required=True)]

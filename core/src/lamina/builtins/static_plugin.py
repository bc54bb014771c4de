"""Blocks declared in config (``[[blocks]]``): inline text or a file next to the config."""

from __future__ import annotations

from collections.abc import Iterator

from lamina.errors import ConfigError
from lamina.hookspecs import hookimpl
from lamina.model.blocks import Block, Provenance
from lamina.records import LayerProvider, ProviderContext


def provide(ctx: ProviderContext) -> Iterator[Block]:
    config = ctx.config
    for i, spec in enumerate(config.blocks):
        path = None
        if spec.file is not None:
            resolved = config.resolve(spec.file)
            try:
                text = resolved.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
                raise ConfigError(
                    f"cannot read {resolved}: {reason}", file=config.path, key=f"blocks[{i}].file"
                ) from exc
            path = spec.file
        else:
            text = spec.text or ""
        yield Block.text(
            spec.id,
            spec.layer,
            text,
            priority=spec.priority,
            truncation=spec.truncation,
            required=spec.required,
            min_tokens=spec.min_tokens,
            max_tokens=spec.max_tokens,
            title=spec.title,
            tag=spec.tag,
            trusted=spec.trusted,
            provenance=Provenance(plugin=ctx.plugin, source_id=f"blocks[{i}]", path=path),
        )


@hookimpl
def lamina_layer_providers() -> list[LayerProvider]:
    return [
        LayerProvider(
            name="static",
            provide=provide,
            required=True,
            description="text and file blocks declared under [[blocks]] in config",
        )
    ]

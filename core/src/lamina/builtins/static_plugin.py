"""Blocks declared in config (``[[blocks]]``): inline text or a file next to the config."""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

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
                text = _read_regular(resolved)
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


#: Text-only blocks made for a config (by plugin name), the same objects every request.
_made: dict[tuple[int, str], tuple[object, list[Block]]] = {}
_made_lock = threading.Lock()


def from_memory(ctx: ProviderContext) -> list[Block] | None:
    """The blocks when none is read from a file (``provide`` then only computes): given on
    the assembling thread, made once per config. With a file block, ``None``: ``provide``
    reads on the pool."""
    config = ctx.config
    key = (id(config), ctx.plugin)
    found = _made.get(key)
    if found is not None and found[0] is config:
        return found[1]
    if any(spec.file is not None for spec in config.blocks):
        return None
    blocks = list(provide(ctx))
    with _made_lock:
        if len(_made) >= 16:
            _made.clear()
        _made[key] = (config, blocks)
    return blocks


def _read_regular(path: Path) -> str:
    """A regular file's UTF-8 text; a FIFO, device or folder is refused without blocking
    (opened non-blocking, checked on the open descriptor, so it cannot be swapped)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    return data.decode("utf-8")


@hookimpl
def lamina_layer_providers() -> list[LayerProvider]:
    return [
        LayerProvider(
            name="static",
            provide=provide,
            from_memory=from_memory,
            required=True,
            description="text and file blocks declared under [[blocks]] in config",
        )
    ]

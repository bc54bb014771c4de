"""``lamina memory``: bulk import into the configured store and show what it holds."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

import click

from lamina import LaminaError, load_config

if TYPE_CHECKING:
    from lamina_memory.records import Memory
    from lamina_memory.service import MemoryService


def _fail(exc: LaminaError) -> NoReturn:
    click.echo(f"lamina: error: {exc}", err=True)
    sys.exit(exc.exit_code)


def _service(config_path: str | None) -> MemoryService:
    from lamina import structure
    from lamina_memory.service import MemoryService
    from lamina_memory.settings import Settings

    config = load_config(config_path)
    if "memory" not in config.sections:
        raise LaminaError(f"{config.where}: no [plugins.memory] section")
    settings = structure(config.sections["memory"], Settings, file=config.path)
    return MemoryService(settings, config)


_config_option = click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False))


@click.group("memory")
def memory_group() -> None:
    """The memory store of [plugins.memory]: import memories, count them."""


@memory_group.command("import")
@_config_option
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def import_cmd(config_path: str | None, files: tuple[str, ...]) -> None:
    """Bulk import .json/.jsonl files (all or nothing per file); chunks are embedded when an
    embedder is configured."""
    try:
        svc = _service(config_path)
        try:
            for f in files:
                n = svc.add(_load(f))
                click.echo(f"{f}: imported {n} memories")
        finally:
            svc.close()
    except LaminaError as exc:
        _fail(exc)


def _load(path: str) -> list[Memory]:
    from lamina_memory.importing import load_file

    return load_file(path)


@memory_group.command("stats")
@_config_option
def stats(config_path: str | None) -> None:
    """How many memories of each kind the store holds."""
    try:
        svc = _service(config_path)
        try:
            store = svc.store
            counts = {
                "events": len(store.events()),
                "chunks": len(store.chunks()),
                "entities": len(store.entities()),
                "relations": len(store.relations()),
                "patterns": len(store.patterns()),
            }
            click.echo(f"{store.name} (version {store.version()})")
            for kind, n in counts.items():
                click.echo(f"  {kind}: {n}")
        finally:
            svc.close()
    except LaminaError as exc:
        _fail(exc)

"""``lamina memory``: bulk import into the configured store and show what it holds."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import click

from lamina import LaminaError, load_config

if TYPE_CHECKING:
    from lamina_memory.service import ImportProgress, MemoryService


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


def interactive() -> bool:
    """Whether progress is shown: standard error is a terminal."""
    return sys.stderr.isatty()


def _progress(name: str) -> Callable[[ImportProgress], None] | None:
    """A progress line rewritten in place on a terminal (memories, embeddings per second);
    nothing when standard error is not one (pipes, logs, CI)."""
    if not interactive():
        return None

    def show(p: ImportProgress) -> None:
        rate = f", {p.rate:,.0f} embeddings/s" if p.embedded else ""
        end = "\n" if p.done >= p.total else ""
        click.echo(f"\r{name}: {p.done:,}/{p.total:,} memories{rate}", err=True, nl=False)
        if end:
            click.echo("", err=True)

    return show


@memory_group.command("import")
@_config_option
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
def import_cmd(config_path: str | None, files: tuple[str, ...]) -> None:
    """Bulk import .json/.jsonl files: each is checked whole before anything is written, then
    written in batches; run again after an interruption, it resumes where it stopped. Chunks
    are embedded when an embedder is configured; a terminal shows the progress."""
    try:
        svc = _service(config_path)
        try:
            for f in files:
                done = svc.import_file(f, progress=_progress(f))
                resumed = f" (resumed after {done.start})" if done.start else ""
                click.echo(f"{f}: imported {done.written} memories{resumed}")
        finally:
            svc.close()
    except LaminaError as exc:
        _fail(exc)


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

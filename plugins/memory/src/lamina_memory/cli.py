"""``lamina memory``: bulk import into the configured store and show what it holds."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import click

from lamina import LaminaError, Progress, load_config, progress

if TYPE_CHECKING:
    from lamina_memory.importing import ImportProgress
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
    svc = MemoryService(settings, config)
    svc.index_progress = IndexProgress()
    return svc


class IndexProgress:
    """The full-text index build's progress line (``lamina.progress``: chunks analysed of the
    store's), drawn only once a build starts and only on a terminal; ``close`` ends it."""

    def __init__(self) -> None:
        self.bar: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = progress("memory index", total=total, unit="chunks", show=interactive())
        self.bar.update(done, total=total)
        if done >= total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


_config_option = click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False))


@click.group("memory")
def memory_group() -> None:
    """The memory store of [plugins.memory]: import memories, count them."""


def interactive() -> bool:
    """Whether progress is shown: standard error is a terminal."""
    return sys.stderr.isatty()


def _progress(name: str) -> Progress:
    """The import's progress line (``lamina.progress``): memories written of the file's and
    embeddings per second, rewritten in place on a terminal; nothing when standard error is
    not one (pipes, logs, CI)."""
    return progress(name, unit="memories", rate_unit="embeddings", show=interactive())


def _shown(bar: Progress) -> Callable[[ImportProgress], None]:
    """The import's reports, counted on ``bar``."""

    def show(p: ImportProgress) -> None:
        bar.update(p.done, rated=p.embedded, total=p.total)

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
                with _progress(f) as bar:
                    done = svc.import_file(f, progress=_shown(bar))
                resumed = f" (resumed after {done.start})" if done.start else ""
                click.echo(f"{f}: imported {done.written} memories{resumed}")
        finally:
            svc.close()
    except LaminaError as exc:
        _fail(exc)


@memory_group.command("reindex")
@_config_option
def reindex(config_path: str | None) -> None:
    """Rebuild a PostgreSQL store's full-text column and indexes: every chunk's text analysed
    again (in batches, never all in memory), the terms counted again, the GIN and HNSW
    indexes rebuilt; a terminal shows the progress. (An SQLite store has nothing to rebuild:
    its BM25 index is built in memory.)"""
    try:
        svc = _service(config_path)
        try:
            store = svc.store
            if not store.searches_chunks:
                click.echo(f"{store.name}: nothing to rebuild (BM25 is built in memory)")
                return
            bar = IndexProgress()
            try:
                total = store.reindex(bar)
            finally:
                bar.close()
            click.echo(f"{store.name}: reindexed {total} chunks")
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
                "chunks": store.count(),
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

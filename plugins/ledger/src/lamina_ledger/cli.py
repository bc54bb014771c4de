"""``lamina ledger``: statistics of a session and imports of JSONL transcripts."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from lamina_ledger.ledger import Ledger


def _open(config_path: str | None, database: str | None, *, readonly: bool) -> Ledger:
    from lamina import LaminaError, load_config
    from lamina_ledger.ledger import Ledger
    from lamina_ledger.settings import settings_from

    try:
        config = load_config(config_path)
        settings = settings_from(config)
        target = database or settings.target(config)
        if target is None:
            raise click.UsageError(
                "no ledger: give --database or set [plugins.ledger] database in the config"
            )
        return Ledger.open(
            target,
            readonly=readonly,
            busy_timeout=settings.busy_timeout,
            connect_timeout=settings.connect_timeout,
        )
    except LaminaError as exc:
        click.echo(f"lamina: error: {exc}", err=True)
        sys.exit(exc.exit_code)


_config = click.option(
    "--config", "-c", "config_path", type=click.Path(dir_okay=False), help="lamina.toml."
)
_database = click.option(
    "--database", "-d", help="SQLite file or postgresql:// URL (default: from config)."
)


@click.group("ledger")
def ledger_group() -> None:
    """The Agents Ledger: session statistics and transcript imports."""


@ledger_group.command("stats")
@click.argument("session")
@_config
@_database
def stats(session: str, config_path: str | None, database: str | None) -> None:
    """Turns, compactions, tokens sent and the cache-hit ratio of SESSION."""
    from lamina import LaminaError

    ledger = _open(config_path, database, readonly=True)
    try:
        with ledger:
            s = ledger.stats(session)
    except LaminaError as exc:
        click.echo(f"lamina: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    ratio = "n/a" if s.cache_hit_ratio is None else f"{s.cache_hit_ratio:.3f}"
    rows = [
        ("session", s.session),
        ("turns", f"{s.turns:,}"),
        ("compactions", f"{s.compactions:,}"),
        ("turns with usage", f"{s.turns_with_usage:,}"),
        ("input tokens", f"{s.input_tokens:,}"),
        ("cached input tokens", f"{s.cached_input_tokens:,}"),
        ("cache write tokens", f"{s.cache_creation_tokens:,}"),
        ("output tokens", f"{s.output_tokens:,}"),
        ("cache-hit ratio", ratio),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        click.echo(f"{key:<{width}}  {value}")


@ledger_group.command("import")
@click.argument("transcript", type=click.Path(exists=True, dir_okay=False))
@click.option("--session", "-s", required=True, help="Label of the new session.")
@_config
@_database
def import_cmd(
    transcript: str, session: str, config_path: str | None, database: str | None
) -> None:
    """Import a pi / OpenClaw JSONL TRANSCRIPT as a new session."""
    from lamina import LaminaError
    from lamina_ledger.importer import import_jsonl

    ledger = _open(config_path, database, readonly=False)
    try:
        with ledger:
            r = import_jsonl(ledger, transcript, session)
    except LaminaError as exc:
        click.echo(f"lamina: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(
        f"imported {r.turns} turns ({r.messages} messages) and {r.compactions} compactions "
        f"into session {r.session!r}; skipped {r.skipped} entries"
    )

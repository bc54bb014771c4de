"""``lamina ledger``: statistics of a session (a table, JSON or an HTML page) and imports of
JSONL transcripts."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from lamina import config_option

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


_database = click.option(
    "--database", "-d", help="SQLite file or postgresql:// URL (default: from config)."
)


@click.group("ledger")
def ledger_group() -> None:
    """The Agents Ledger: session statistics and transcript imports."""


@ledger_group.command("stats")
@click.argument("session")
@click.option("--per-turn", is_flag=True, help="List every turn (usage, cost, prefix, busts).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--html", "as_html", is_flag=True, help="Write one self-contained HTML page with charts."
)
@config_option
@_database
def stats(
    session: str,
    per_turn: bool,
    as_json: bool,
    as_html: bool,
    config_path: str | None,
    database: str | None,
) -> None:
    """Turns, compactions, tokens, cost and the cache-hit ratio of SESSION; with --per-turn
    each turn, a cache bust naming the first block of the stable prefix that changed."""
    import json

    from lamina import LaminaError
    from lamina_ledger.stats import report_data, turn_report

    if as_json and as_html:
        raise click.UsageError("--json and --html: choose one")
    ledger = _open(config_path, database, readonly=True)
    try:
        with ledger:
            report = turn_report(ledger, session)
    except LaminaError as exc:
        click.echo(f"lamina: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    if as_html:
        from lamina_ledger.stats_page import render_stats_html

        click.echo(render_stats_html(report), nl=False)
    elif as_json:
        click.echo(json.dumps(report_data(report, per_turn=per_turn), indent=2))
    else:
        from lamina_ledger.stats_text import stats_text

        click.echo(stats_text(report, per_turn=per_turn), nl=False)


@ledger_group.command("import")
@click.argument("transcript", type=click.Path(exists=True, dir_okay=False))
@click.option("--session", "-s", required=True, help="Label of the new session.")
@config_option
@_database
def import_cmd(
    transcript: str, session: str, config_path: str | None, database: str | None
) -> None:
    """Import a pi / OpenClaw JSONL TRANSCRIPT as a new session (a terminal shows the
    progress)."""
    from lamina import LaminaError, progress
    from lamina_ledger.importer import import_jsonl

    ledger = _open(config_path, database, readonly=False)
    try:
        with ledger, progress(transcript, unit="entries") as bar:
            r = import_jsonl(ledger, transcript, session, progress=bar)
    except LaminaError as exc:
        click.echo(f"lamina: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    click.echo(
        f"imported {r.turns} turns ({r.messages} messages) and {r.compactions} compactions "
        f"into session {r.session!r}; skipped {r.skipped} entries"
    )

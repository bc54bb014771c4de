"""``lamina working-set``: check the manifest, apply updates, show the change log."""

from __future__ import annotations

import sys
from typing import NoReturn, TextIO, cast

import click

from lamina import LaminaError, config_option, load_config, plural
from lamina_workspace.beneath import FileRefused, open_regular
from lamina_workspace.files import read_open
from lamina_workspace.manifest import read_manifest
from lamina_workspace.settings import NAME
from lamina_workspace.updates import Actor, apply_updates, parse_actions
from lamina_workspace.where import Workspace, settings_of, workspace_of


def _fail(exc: LaminaError) -> NoReturn:
    click.echo(f"lamina: error: {exc}", err=True)
    sys.exit(exc.exit_code)


def _workspace(config_path: str | None) -> Workspace:
    config = load_config(config_path)
    settings = settings_of(config)
    if settings is None or settings.working_set is None:
        raise LaminaError(
            f"{config.path or 'config'}: no working set configured (set plugins.{NAME}.working_set)"
        )
    return workspace_of(config, settings)


@click.group("working-set")
def working_set() -> None:
    """The working-set manifest: check it, update it, read its change log."""


@working_set.command("check")
@config_option
def check(config_path: str | None) -> None:
    """Validate working-set.yml and say which files it lists."""
    try:
        ws = _workspace(config_path)
        manifest = read_manifest(ws.root, ws.manifest)
    except LaminaError as exc:
        _fail(exc)
    n = len(manifest.files)
    click.echo(f"{ws.shown}: valid ({manifest.protocol}, {n} {plural(n, 'file')})")
    for f in manifest.files:
        click.echo(f"  {f.priority:.2f} {f.role:<9} {f.truncate_strategy:<6} {f.path}")


@working_set.command("apply")
@config_option
@click.argument("updates", type=click.File("r", encoding="utf-8"), default="-")
@click.option(
    "--actor",
    type=click.Choice(["model", "orchestrator", "user"]),
    default="model",
    show_default=True,
)
def apply(config_path: str | None, updates: TextIO, actor: str) -> None:
    """Apply add_to_working_set / remove_from_working_set / adjust_priority actions (YAML:
    one mapping, a list, or several documents), all or nothing."""
    text = updates.read()
    try:
        ws = _workspace(config_path)
        changes = apply_updates(ws, parse_actions(text, "updates"), actor=cast(Actor, actor))
    except LaminaError as exc:
        _fail(exc)
    for c in changes:
        click.echo(f"{c.action} {c.path}: {c.why}")


@working_set.command("log")
@config_option
def log(config_path: str | None) -> None:
    """Print the append-only change log (JSON lines)."""
    try:
        ws = _workspace(config_path)
        fd, st = open_regular(ws.root, ws.log)
        text = read_open(fd, st.st_size, shown=ws.log).text
    except FileRefused as exc:
        if exc.reason == "no such file":
            return
        _fail(exc)
    except LaminaError as exc:
        _fail(exc)
    click.echo(text, nl=False)

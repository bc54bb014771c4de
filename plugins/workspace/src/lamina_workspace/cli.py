"""``lamina working-set``: check the manifest, apply updates, show the change log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn, TextIO

import click

from lamina import LaminaError, load_config


def _fail(exc: LaminaError) -> NoReturn:
    click.echo(f"lamina: error: {exc}", err=True)
    sys.exit(exc.exit_code)


def _workspace(config_path: str | None):  # type: ignore[no-untyped-def]
    from lamina_workspace.plugin import NAME, manifest_location, settings_of
    from lamina_workspace.system_prompt import workspace_root
    from lamina_workspace.updates import Workspace

    config = load_config(config_path)
    settings = settings_of(config)
    if settings is None or settings.working_set is None:
        raise LaminaError(
            f"{config.path or 'config'}: no working set configured (set plugins.{NAME}.working_set)"
        )
    manifest, _shown = manifest_location(config, settings)
    root = workspace_root(config, settings)
    return Workspace(root=root, manifest=manifest, log=root / settings.change_log)


_config_option = click.option("--config", "-c", "config_path", type=click.Path(dir_okay=False))


@click.group("working-set")
def working_set() -> None:
    """The working-set manifest (seed 002): check it, update it, read its change log."""


@working_set.command("check")
@_config_option
def check(config_path: str | None) -> None:
    """Validate working-set.yml and say which files it lists."""
    from lamina_workspace.manifest import read_manifest

    try:
        ws = _workspace(config_path)
        manifest = read_manifest(ws.manifest, ws.shown)
    except LaminaError as exc:
        _fail(exc)
    click.echo(f"{ws.shown}: valid ({manifest.protocol}, {len(manifest.files)} files)")
    for f in manifest.files:
        click.echo(f"  {f.priority:.2f} {f.role:<9} {f.truncate_strategy:<6} {f.path}")


@working_set.command("apply")
@_config_option
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
    from lamina_workspace.updates import apply_updates, parse_actions

    text = updates.read()
    try:
        ws = _workspace(config_path)
        changes = apply_updates(ws, parse_actions(text, "updates"), actor=actor)  # type: ignore[arg-type]
    except LaminaError as exc:
        _fail(exc)
    for c in changes:
        click.echo(f"{c.action} {c.path}: {c.why}")


@working_set.command("log")
@_config_option
def log(config_path: str | None) -> None:
    """Print the append-only change log (JSON lines)."""
    try:
        ws = _workspace(config_path)
    except LaminaError as exc:
        _fail(exc)
    path = Path(ws.log)
    if path.exists():
        click.echo(path.read_text("utf-8"), nl=False)

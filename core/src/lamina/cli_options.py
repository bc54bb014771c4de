"""Options shared by ``lamina`` commands and plugins' commands, so ``--config`` reads the same
everywhere."""

from __future__ import annotations

import click

__all__ = ["config_option"]

#: ``--config/-c FILE`` passed as ``config_path`` (``None``: the nearest lamina.toml).
config_option = click.option(
    "--config",
    "-c",
    "config_path",
    type=click.Path(dir_okay=False),
    help="lamina.toml or pyproject.toml (default: the nearest one).",
)

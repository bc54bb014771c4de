"""``python -m lamina``: the command line."""

from lamina.cli import run

run()

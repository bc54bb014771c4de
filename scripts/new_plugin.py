"""Copy contrib/plugin-template/ into a new plugin project under a new name.

    python scripts/new_plugin.py NAME [DEST]        (or: ./dev new-plugin NAME [DEST])

NAME is the plugin's entry point name (``[a-z][a-z0-9_]*``); the distribution becomes
``lamina-<name with dashes>``, the package ``lamina_<name>``. DEST defaults to
``./lamina-<name>``; it must not exist. Every occurrence of the template's placeholder
``myplugin`` (file contents and paths) is replaced.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[1] / "contrib" / "plugin-template"
PLACEHOLDER = "myplugin"
SKIP = {"__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache"}


def rename(text: str, name: str) -> str:
    """The template's names replaced: distribution, package, entry point, title."""
    dist = name.replace("_", "-")
    text = text.replace(f"lamina-{PLACEHOLDER}", f"lamina-{dist}")
    text = text.replace(f"lamina_{PLACEHOLDER}", f"lamina_{name}")
    text = text.replace(PLACEHOLDER, name)
    return text.replace(PLACEHOLDER.capitalize(), name.capitalize())


def copy_template(name: str, dest: Path) -> list[Path]:
    """Copy the template to ``dest`` under ``name``; returns the files written."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"plugin name {name!r}: use lowercase letters, digits and underscores")
    if dest.exists():
        raise FileExistsError(f"{dest} already exists")
    written = []
    for src in sorted(TEMPLATE.rglob("*")):
        rel = src.relative_to(TEMPLATE)
        if src.is_dir() or SKIP & set(rel.parts) or src.suffix == ".pyc":
            continue
        target = dest / rename(str(rel), name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(rename(src.read_text("utf-8"), name), encoding="utf-8")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="the plugin's entry point name, e.g. notes")
    parser.add_argument("dest", nargs="?", help="folder to create (default ./lamina-NAME)")
    args = parser.parse_args(argv)
    dest = Path(args.dest or f"lamina-{args.name.replace('_', '-')}")
    try:
        files = copy_template(args.name, dest)
    except (ValueError, FileExistsError) as exc:
        print(f"new-plugin: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"created {dest} ({len(files)} files); next: pip install -e '{dest}[test]' && pytest {dest}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

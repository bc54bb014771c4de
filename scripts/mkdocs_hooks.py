"""MkDocs hooks: a config-reference page for every first-party plugin (plugins/*/) and contrib
bundle (contrib/*/), generated from its README.md at build time, and added to the nav."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = (("plugins", "First-party plugins"), ("contrib", "Contrib bundles"))
LINK = re.compile(r"(!?)\[([^\]]*)\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def packages(folder: str) -> list[tuple[str, Path]]:
    """``(distribution, folder)`` for each package under ``folder`` with a pyproject."""
    found = []
    for pyproject in sorted((ROOT / folder).glob("*/pyproject.toml")):
        if pyproject.parent.name == "plugin-template":
            continue
        project = tomllib.loads(pyproject.read_text("utf-8")).get("project", {})
        found.append((project.get("name", pyproject.parent.name), pyproject.parent))
    return found


def page(dist: str, folder: Path) -> str:
    """The package's README, links into docs/ kept, other relative links shown as paths."""
    readme = folder / "README.md"
    rel = folder.relative_to(ROOT)
    if not readme.is_file():
        project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]
        return (
            f"# {dist}\n\n{project.get('description', '')}\n\n"
            f"This package (`{rel}/`) has no README yet, so no config reference.\n"
        )

    def fix(match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        path, _, anchor = target.partition("#")
        resolved = (folder / path).resolve()
        docs = ROOT / "docs"
        if resolved.is_relative_to(docs) and resolved.suffix == ".md":
            new = "../" + resolved.relative_to(docs).as_posix() + (f"#{anchor}" if anchor else "")
            return f"{bang}[{text}]({new})"
        shown = (
            resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else Path(path)
        ).as_posix()
        return f"{text} (`{shown}`)"

    body = LINK.sub(fix, readme.read_text("utf-8"))
    return f"{body.rstrip()}\n\n---\n\nSource: `{rel}/README.md`.\n"


def _uri(folder: str, path: Path) -> str:
    return f"reference/{folder}/{path.name}.md"


def on_config(config: Any) -> Any:
    nav = config["nav"]
    entries = []
    for folder, title in SECTIONS:
        pages = [{dist: _uri(folder, path)} for dist, path in packages(folder)]
        if pages:
            entries.append({title: pages})
    if entries and nav is not None:
        nav.append({"Plugin reference": entries})
    return config


def on_files(files: Files, config: Any) -> Files:
    for folder, _ in SECTIONS:
        for dist, path in packages(folder):
            files.append(File.generated(config, _uri(folder, path), content=page(dist, path)))
    return files

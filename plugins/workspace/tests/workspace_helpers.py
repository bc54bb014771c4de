"""Helpers shared by the workspace plugin's tests (imported by name: conftest puts this folder on sys.path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

AGENTS = "# Rules\n\n- Be brief.\n"
USER = "- Name: Dana\n- Timezone: Europe/Lisbon\n"
SOUL = "You are Atlas, calm and precise.\n"
IDENTITY = "- Name: Atlas\n"


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path


def config_for(root: Path, **section: Any) -> dict[str, Any]:
    """A config dict using the workspace plugin at ``root`` with fixed runtime info."""
    settings: dict[str, Any] = {
        "root": str(root),
        "persona": "atlas",
        "host": "h1",
        "os": "linux",
        "arch": "x86_64",
    }
    settings.update(section)
    return {"model": "gpt-4o", "plugins": {"workspace": settings}}

"""Fixtures for the workspace plugin's tests: a small workspace on disk, a file writer, a
config that uses the workspace, and assemblers over it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lamina_workspace import plugin as workspace_plugin

from lamina import Assembler
from lamina.testing import make_assembler

AGENTS = "# Rules\n\n- Be brief.\n"
USER = "- Name: Dana\n- Timezone: Europe/Lisbon\n"
SOUL = "You are Atlas, calm and precise.\n"
IDENTITY = "- Name: Atlas\n"


def write_file(root: Path, rel: str, text: str | bytes) -> Path:
    """Write ``text`` to ``root/rel`` (folders created); returns the path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path


def workspace_config(root: Path, **section: Any) -> dict[str, Any]:
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


@pytest.fixture(scope="session")
def write() -> Callable[[Path, str, str | bytes], Path]:
    """``write(root, rel, text)``: a file under ``root``, its folders created."""
    return write_file


@pytest.fixture(scope="session")
def config_for() -> Callable[..., dict[str, Any]]:
    """``config_for(root, **section)``: a config using the workspace plugin at ``root``."""
    return workspace_config


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with AGENTS.md, a user IDENTITY.md and persona ``atlas``."""
    root = tmp_path / "ws"
    write_file(root, "AGENTS.md", AGENTS)
    write_file(root, "IDENTITY.md", USER)
    write_file(root, "personas/atlas/SOUL.md", SOUL)
    write_file(root, "personas/atlas/IDENTITY.md", IDENTITY)
    return root


@pytest.fixture
def assembler() -> Iterator[Callable[..., Assembler]]:
    """Build isolated assemblers with the workspace plugin registered (closed afterwards)."""
    made: list[Assembler] = []

    def factory(config: dict[str, Any], *, extra: tuple[tuple[str, object], ...] = ()) -> Assembler:
        a = make_assembler(config, plugins=[("workspace", workspace_plugin), *extra])
        made.append(a)
        return a

    yield factory
    for a in made:
        a.close()

"""Fixtures for the workspace plugin's tests: a small workspace on disk and assemblers over it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # for workspace_helpers

from lamina_workspace import plugin as workspace_plugin
from workspace_helpers import AGENTS, IDENTITY, SOUL, USER, write

from lamina import Assembler
from lamina.testing import make_assembler


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with AGENTS.md, a user IDENTITY.md and persona ``atlas``."""
    root = tmp_path / "ws"
    write(root, "AGENTS.md", AGENTS)
    write(root, "IDENTITY.md", USER)
    write(root, "personas/atlas/SOUL.md", SOUL)
    write(root, "personas/atlas/IDENTITY.md", IDENTITY)
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

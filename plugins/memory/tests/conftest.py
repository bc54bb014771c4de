"""Shared fixtures for the memory plugin's tests."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import lamina_memory.plugin as memory_plugin
import pytest
from lamina_memory.service import MemoryService

from lamina import Assembler
from lamina.testing import make_assembler
from lamina.testing.postgres import postgres_dsn

__all__ = ["postgres_dsn"]  # the test session's PostgreSQL server (pgserver, with pgvector)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def build(section: dict[str, Any] | None = None, **top: Any) -> tuple[Assembler, MemoryService]:
    """An isolated assembler with the memory plugin (in-memory store, BM25 alone and no
    neighbours unless told otherwise: the tests' expected rankings are BM25's; the defaults
    have tests of their own)."""
    config: dict[str, Any] = {"model": "gpt-4o", **top}
    config["plugins"] = {
        "memory": {"store": "memory:", "embedder": "none", "neighbours": 0, **(section or {})}
    }
    asm = make_assembler(config, plugins=[("memory", memory_plugin)], now=NOW)
    return asm, memory_plugin.SERVICES[None]


@pytest.fixture
def make() -> Iterator[Any]:
    made: list[tuple[Assembler, MemoryService]] = []

    def factory(
        section: dict[str, Any] | None = None, **top: Any
    ) -> tuple[Assembler, MemoryService]:
        pair = build(section, **top)
        made.append(pair)
        return pair

    yield factory
    for asm, svc in made:
        asm.close()
        svc.close()

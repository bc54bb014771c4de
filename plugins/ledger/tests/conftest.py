"""Fixtures: the test session's PostgreSQL server (``lamina.testing.postgres``), a ``target``
that runs a test against an SQLite file and a fresh PostgreSQL schema, and turn builders."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lamina import Message, ToolCallPart, ToolResultPart
from lamina.testing.postgres import fresh_schema, postgres_dsn

__all__ = ["postgres_dsn"]


def make_target(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A ledger location of ``kind``: an SQLite file, or an empty PostgreSQL schema."""
    if kind == "sqlite":
        return str(tmp_path / "ledger.db")
    return fresh_schema(request.getfixturevalue("postgres_dsn"))


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A ledger location: an SQLite file, or an empty schema on the test PostgreSQL server."""
    return make_target(request.param, tmp_path, request)


def build_exchange(i: int, result: str = "ok", *, size: int = 1) -> list[Message]:
    """A turn: the user asks, the assistant calls a tool, the tool answers, the assistant replies."""
    return [
        Message.of("user", f"Please look at src/mod{i}.py question {i}?"),
        Message(
            role="assistant",
            content=(
                ToolCallPart(id=f"call{i}", name="read", arguments={"path": f"src/mod{i}.py"}),
            ),
        ),
        Message(role="tool", content=(ToolResultPart(call_id=f"call{i}", content=result * size),)),
        Message.of("assistant", f"We decided to use approach {i}."),
    ]


@pytest.fixture
def exchange() -> Callable[..., list[Message]]:
    """``exchange(i, result="ok", size=1)``: a turn with a tool call and its result."""
    return build_exchange


def build_config(database: str, budget: int = 100_000) -> dict[str, Any]:
    """A config for session ``s`` on gpt-4o with the ledger at ``database``, no reserves."""
    return {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": database}},
    }


@pytest.fixture
def ledger_config() -> Callable[..., dict[str, Any]]:
    """``ledger_config(database, budget=100_000)``: see ``build_config``."""
    return build_config

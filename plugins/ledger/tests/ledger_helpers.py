"""Small builders shared by the ledger tests."""

from __future__ import annotations

import uuid

from lamina import Message, ToolCallPart, ToolResultPart


def exchange(i: int, result: str = "ok", *, size: int = 1) -> list[Message]:
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


def fresh_schema(server: str) -> str:
    """A URL whose ``search_path`` is a new, empty schema on ``server``."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{server}?options=-csearch_path%3D{name}"

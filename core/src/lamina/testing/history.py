"""Block builders for tests: conversation turns (plain and with a tool call) as session
blocks, and deterministic filler text."""

from __future__ import annotations

from lamina.model.blocks import Block
from lamina.model.messages import ToolCallPart, ToolResultPart


def turn(n: int, user: str, assistant: str) -> list[Block]:
    """One user/assistant exchange as two session blocks sharing a group."""
    return [
        Block.text(f"t{n}:u", "session", user, role="user", group=f"t{n}"),
        Block.text(f"t{n}:a", "session", assistant, role="assistant", group=f"t{n}"),
    ]


def tool_turn(n: int, ask: str, output: str) -> list[Block]:
    """A turn where the assistant calls a tool and gets its result."""
    call = f"call{n}"
    return [
        Block.text(f"t{n}:u", "session", ask, role="user", group=f"t{n}"),
        Block(
            id=f"t{n}:call",
            layer="session",
            role="assistant",
            group=f"t{n}",
            content=(ToolCallPart(id=call, name="read_file", arguments={"path": f"f{n}.py"}),),
        ),
        Block(
            id=f"t{n}:result",
            layer="session",
            role="tool",
            group=f"t{n}",
            content=(ToolResultPart(call_id=call, content=output),),
        ),
        Block.text(f"t{n}:a", "session", f"Read f{n}.py.", role="assistant", group=f"t{n}"),
    ]


def words(n: int, seed: int = 0) -> str:
    """``n`` distinct-ish words (deterministic)."""
    vocab = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "omega",
        "sigma",
        "kappa",
        "lambda",
        "theta",
        "zeta",
    ]
    return " ".join(f"{vocab[(i * 7 + seed) % len(vocab)]}{(i + seed) % 97}" for i in range(n))

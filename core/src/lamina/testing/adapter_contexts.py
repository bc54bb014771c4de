"""Contexts for testing adapters: ``make_context`` builds an ``AssembledContext`` by hand, and
``SCENARIOS`` and ``random_history`` are the conversations every adapter must turn into a
valid request."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from lamina.model import (
    AssembledContext,
    BudgetUsage,
    ImagePart,
    Message,
    ModelConfig,
    Part,
    TextPart,
    TokenBudget,
    Tool,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["LONG_SYSTEM", "PNG", "SCENARIOS", "TOOLS", "make_context", "random_history"]

LONG_SYSTEM = "You are the release assistant for the Lamina project. " * 400
TOOLS = (
    Tool(
        name="read_file",
        description="Read a file of the workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Relative path."}},
            "required": ["path"],
        },
    ),
)


def make_context(
    *,
    model: str,
    provider: str,
    history: Sequence[Message] = (),
    current: str = "What changed since yesterday?",
    system: str = "You are a careful assistant.",
    tools: Sequence[Tool] = TOOLS,
    system_tokens: int | None = None,
    history_tokens: int | None = None,
    attachments: Sequence[Part] = (),
    max_tokens: int | None = None,
) -> AssembledContext:
    """An ``AssembledContext`` built by hand (no assembler), with a plausible budget."""
    sys_tokens = system_tokens if system_tokens is not None else len(system) // 4
    hist_tokens = (
        history_tokens
        if history_tokens is not None
        else sum(len(m.text) for m in history) // 4 + 4 * len(history)
    )
    event_tokens = len(current) // 4 + 4
    budget = TokenBudget.plan(model_limit=200_000, reserve_response=4096, reserve_tools=0)
    used_total = sys_tokens + hist_tokens + event_tokens
    used = BudgetUsage(
        system_prompt=sys_tokens, history=hist_tokens, event=event_tokens, total=used_total
    )
    budget = budget.spent(used)
    return AssembledContext(
        system_prompt=system,
        history=tuple(history),
        current_message=Message(role="user", content=(TextPart(text=current), *attachments)),
        tools=tuple(tools),
        model=model,
        provider=provider,
        model_config=ModelConfig(max_tokens=max_tokens),
        token_budget=budget,
        session_label="conformance-session",
        role="unified",
        workspace_path=".",
    )


PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _call(call_id: str, name: str = "read_file") -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={"path": f"notes/{call_id}.md"})


def _result(call_id: str, content: str = "file contents", error: bool = False) -> ToolResultPart:
    return ToolResultPart(call_id=call_id, content=content, is_error=error)


#: Named conversations every adapter must turn into a valid request.
SCENARIOS: dict[str, tuple[Message, ...]] = {
    "empty": (),
    "simple": (
        Message.of("user", "Hello there."),
        Message.of("assistant", "Hi! How can I help?"),
    ),
    "same-role-runs": (
        Message.of("user", "First note."),
        Message.of("user", "Second note."),
        Message.of("assistant", "Noted."),
        Message.of("assistant", "Anything else?"),
    ),
    "assistant-first": (
        Message.of("assistant", "Earlier I said the build was green."),
        Message.of("user", "Is it still?"),
    ),
    "tool-round-trip": (
        Message.of("user", "Read the changelog."),
        Message(
            role="assistant",
            content=(TextPart(text="Reading it."), _call("call_1"), _call("call_2")),
        ),
        Message(role="tool", content=(_result("call_2", "second"),)),
        Message(role="tool", content=(_result("call_1", "first", error=True),)),
        Message.of("assistant", "Both read."),
    ),
    "orphans": (
        Message(role="tool", content=(_result("ghost", "result with no call"),)),
        Message(role="assistant", content=(_call("call_9"),)),
        Message.of("user", "Never mind that."),
        Message(role="assistant", content=(_call("call_3"),)),
    ),
    "blank-and-image": (
        Message.of("user", "   "),
        Message(
            role="user",
            content=(
                TextPart(text="See the diagram."),
                ImagePart(media_type="image/png", data=PNG),
            ),
        ),
        Message.of("assistant", ""),
        Message.of("assistant", "It shows the pipeline."),
    ),
    "history-ends-with-call": (
        Message.of("user", "Check the file."),
        Message(role="assistant", content=(TextPart(text="Checking."), _call("call_7"))),
    ),
}


def random_history(seed: int) -> tuple[Message, ...]:
    """A messy random conversation: roles, blank text, tool calls with missing, duplicate,
    reordered or stray results."""
    rng = random.Random(seed)
    out: list[Message] = []
    pending: list[str] = []
    for i in range(rng.randint(0, 12)):
        kind = rng.choice(["user", "assistant", "call", "result", "stray", "blank"])
        if kind == "call":
            ids = [f"c{seed}_{i}_{k}" for k in range(rng.randint(1, 3))]
            pending.extend(ids)
            out.append(Message(role="assistant", content=tuple(_call(c) for c in ids)))
        elif kind == "result" and pending:
            rng.shuffle(pending)
            out.append(Message(role="tool", content=(_result(pending.pop(), f"out {i}"),)))
        elif kind == "stray":
            out.append(Message(role="tool", content=(_result(f"stray{i}", "lost"),)))
        elif kind == "blank":
            out.append(Message.of(rng.choice(("user", "assistant")), " "))
        else:
            role: Literal["user", "assistant"] = "assistant" if kind == "assistant" else "user"
            out.append(Message.of(role, f"{role} message {i}"))
    return tuple(out)

"""The ``context_json`` of a turn's user message, as the Broker design records it (the kernel's
``lamina.event_context``): put on the turn's first user message unless it has its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import evolve

from lamina import Message


def with_user_context(messages: Sequence[Message], context: dict[str, Any] | None) -> list[Message]:
    """``messages`` with ``context`` on the first user message, unless it has its own."""
    out = list(messages)
    if context is None:
        return out
    for i, m in enumerate(out):
        if m.role == "user":
            if m.context_json is None:
                out[i] = evolve(m, context_json=context)
            break
    return out

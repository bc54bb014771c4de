"""``AgentResult``: what the agent engine hands back after a turn (the Broker design), which the
host records so the next turn's history holds it."""

from __future__ import annotations

from attrs import field, frozen

from lamina.model.messages import Message, ToolCallPart, ToolResultPart
from lamina.model.text import clean
from lamina.model.usage import Usage


@frozen(kw_only=True)
class AgentResult:
    """One finished turn: its messages, the provider's usage, why it stopped and any error.

    ``messages`` are the turn as history should hold it, oldest first: usually the current
    message the host sent (``AssembledContext.current_message``), then what the agent produced
    (assistant messages with their tool calls, tool messages with the results). ``usage`` is
    what the provider reported, cached input tokens included. ``model`` and ``provider`` say
    who answered (default: the config's); ``parent_turn_id`` continues a chosen turn instead
    of the session's head.
    """

    messages: tuple[Message, ...]
    usage: Usage = field(factory=Usage)
    stop_reason: str = field(default="end_turn", converter=clean)
    error: str | None = None
    model: str | None = None
    provider: str | None = None
    parent_turn_id: str | None = None

    def tool_calls(self) -> tuple[tuple[ToolCallPart, ToolResultPart | None], ...]:
        """Each tool call of the turn with its result (``None`` when it has none)."""
        results = {
            p.call_id: p for m in self.messages for p in m.content if isinstance(p, ToolResultPart)
        }
        return tuple(
            (p, results.get(p.id))
            for m in self.messages
            for p in m.content
            if isinstance(p, ToolCallPart)
        )

"""Turn grouping: a history as the alternating, tool-paired turns every provider wants.

Every provider wants roughly the same thing of a history: user and assistant turns (tool
results count as user input), no empty text, every tool call answered in the very next turn
and every tool result answering a call of the turn before. ``turns`` produces that; each
adapter then spells the turns in its own wire format. Nothing is dropped silently: a call
without a result, or a result without its call, becomes a text note in place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Literal

from attrs import evolve, frozen

from lamina.model import Message, Part, TextPart, ToolCallPart, ToolResultPart

TurnRole = Literal["user", "assistant"]

#: Opens a conversation whose first kept turn is the assistant's, for providers that need a
#: user turn first.
LEAD_IN = "(The conversation so far continues below.)"


@frozen(kw_only=True)
class Turn:
    """One turn of a cleaned conversation: a role and its parts (tool results first)."""

    role: TurnRole
    parts: tuple[Part, ...]
    #: Index of the source message each part came from (parallel to ``parts``).
    origins: tuple[int, ...] = ()


def turns(messages: Sequence[Message], *, lead_in: str | None = LEAD_IN) -> list[Turn]:
    """Merge ``messages`` into alternating user/assistant turns with every tool call paired.

    ``lead_in`` (when not ``None``) is a user turn put first when the first turn is the
    assistant's. Tool results of one turn come first, in the order of the calls they answer.
    """
    merged: list[Turn] = []
    for index, message in enumerate(messages):
        role: TurnRole = "assistant" if message.role == "assistant" else "user"
        parts = [p for p in message.content if not _blank(p)]
        if not parts:
            continue
        if merged and merged[-1].role == role:
            last = merged[-1]
            merged[-1] = evolve(
                last,
                parts=(*last.parts, *parts),
                origins=(*last.origins, *(index,) * len(parts)),
            )
        else:
            merged.append(Turn(role=role, parts=tuple(parts), origins=(index,) * len(parts)))
    out = [_paired(turn, merged, i) for i, turn in enumerate(merged)]
    if lead_in is not None and out and out[0].role == "assistant":
        out.insert(0, Turn(role="user", parts=(TextPart(text=lead_in),), origins=(-1,)))
    return out


def _blank(part: Part) -> bool:
    return isinstance(part, TextPart) and not part.text.strip()


def _calls(turn: Turn | None) -> dict[str, ToolCallPart]:
    if turn is None or turn.role != "assistant":
        return {}
    found: dict[str, ToolCallPart] = {}
    for part in turn.parts:
        if isinstance(part, ToolCallPart):
            found.setdefault(part.id, part)
    return found


def _results(turn: Turn | None) -> set[str]:
    if turn is None or turn.role != "user":
        return set()
    return {p.call_id for p in turn.parts if isinstance(p, ToolResultPart)}


def _paired(turn: Turn, merged: Sequence[Turn], i: int) -> Turn:
    """``turn`` with unpaired calls and results turned into text and results moved first."""
    before = merged[i - 1] if i > 0 else None
    after = merged[i + 1] if i + 1 < len(merged) else None
    parts: list[tuple[Part, int]] = []
    if turn.role == "assistant":
        answered = _results(after)
        seen: set[str] = set()
        for part, origin in zip(turn.parts, turn.origins, strict=True):
            if isinstance(part, ToolCallPart):
                if part.id in answered and part.id not in seen:
                    seen.add(part.id)
                else:
                    part = TextPart(text=call_note(part))
            elif isinstance(part, ToolResultPart):
                part = TextPart(text=result_note(part))
            parts.append((part, origin))
        return evolve(turn, parts=tuple(p for p, _ in parts), origins=tuple(o for _, o in parts))
    calls = _calls(before)
    first: dict[str, tuple[Part, int]] = {}
    rest: list[tuple[Part, int]] = []
    for part, origin in zip(turn.parts, turn.origins, strict=True):
        if isinstance(part, ToolResultPart) and part.call_id in calls:
            if part.call_id not in first:
                first[part.call_id] = (part, origin)
                continue
            rest.append((TextPart(text=result_note(part)), origin))
        elif isinstance(part, ToolResultPart):
            rest.append((TextPart(text=result_note(part)), origin))
        elif isinstance(part, ToolCallPart):
            rest.append((TextPart(text=call_note(part)), origin))
        else:
            rest.append((part, origin))
    ordered = [first[c] for c in calls if c in first] + rest
    return evolve(turn, parts=tuple(p for p, _ in ordered), origins=tuple(o for _, o in ordered))


def call_note(part: ToolCallPart) -> str:
    """A tool call with no result kept as text, so the request stays valid and nothing is lost."""
    args = json.dumps(part.arguments, sort_keys=True, ensure_ascii=False)
    return f"[tool call {part.name} (id {part.id}) with arguments {args}: no result recorded]"


def result_note(part: ToolResultPart) -> str:
    """A tool result whose call is not in the turn before, kept as text."""
    status = "error" if part.is_error else "result"
    return f"[tool {status} for call {part.call_id}]\n{part.content}"


def call_names(messages: Iterable[Message]) -> dict[str, str]:
    """Tool name by call id, for providers whose results must repeat the tool's name."""
    return {p.id: p.name for m in messages for p in m.content if isinstance(p, ToolCallPart)}


def result_text(part: ToolResultPart) -> str:
    """A result's content, marked when the tool failed (for providers with no error flag)."""
    return f"[tool error]\n{part.content}" if part.is_error else part.content

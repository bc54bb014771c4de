"""Turn grouping: a history as the alternating, tool-paired turns every provider wants.

Every provider wants roughly the same thing of a history: user and assistant turns (tool
results count as user input), no empty text, every tool call answered in the very next turn
and every tool result answering a call of the turn before. ``turns`` produces that; each
adapter then spells the turns in its own wire format. Nothing is dropped silently: a call
without a result, or a result without its call, becomes a text note in place.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Literal

from attrs import evolve, frozen

from lamina.model import (
    AssembledContext,
    Chunked,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

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
    merged = _merged(messages, [])
    return _led([_paired(turn, merged, i) for i, turn in enumerate(merged)], lead_in)


def context_turns(context: AssembledContext, *, lead_in: str | None = LEAD_IN) -> list[Turn]:
    """``turns`` of the context's history and current message. A session's history turns are
    kept between calls (``KEPT`` sessions): when the history grew from the last call's (a
    ``Chunked`` that shares its chunks), only its last turns are grouped and paired again,
    so building a request costs what changed rather than the whole conversation."""
    history = context.history
    merged, paired = _kept.get(context.session_label, history)
    if isinstance(history, Chunked):
        _kept.put(context.session_label, history, merged, paired)
    start = merged[-1].origins[0] if merged else 0
    _, out = _regrouped(merged, paired, (*history[start:], context.current_message), start)
    return _led(out, lead_in)


#: Sessions whose history turns ``context_turns`` keeps.
KEPT = 64


#: A kept history, its merged turns and its paired ones.
_Entry = tuple[Chunked[Message], tuple[Turn, ...], tuple[Turn, ...]]


class _Kept:
    """Per session: the last history ``context_turns`` saw, merged and paired."""

    def __init__(self) -> None:
        self._by_session: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self, session: str, history: Sequence[Message]
    ) -> tuple[Sequence[Turn], Sequence[Turn]]:
        """The merged and paired turns of ``history``, from the session's kept ones when
        ``history`` grew from them: all but their last merged turn stand, and all but the
        last two paired ones."""
        with self._lock:
            found = self._by_session.get(session)
        if found is None or not _grew(history, found[0]):
            return _regrouped((), (), history, 0)
        kept, before, paired_before = found
        if len(history) == len(kept):
            return before, paired_before
        start = before[-1].origins[0] if before else 0
        return _regrouped(before, paired_before, history[start:], start)

    def put(
        self,
        session: str,
        history: Chunked[Message],
        merged: Sequence[Turn],
        paired: Sequence[Turn],
    ) -> None:
        entry = (history, tuple(merged), tuple(paired))
        with self._lock:
            self._by_session[session] = entry
            self._by_session.move_to_end(session)
            while len(self._by_session) > KEPT:
                self._by_session.popitem(last=False)


_kept = _Kept()


def _grew(history: Sequence[Message], kept: Chunked[Message]) -> bool:
    """Whether ``history`` holds ``kept`` 's messages first, as they are (it was grown from
    it, sharing its chunks)."""
    return isinstance(history, Chunked) and len(history) >= len(kept) and history.shares(kept)


def _regrouped(
    merged: Sequence[Turn], paired: Sequence[Turn], tail: Sequence[Message], start: int
) -> tuple[list[Turn], list[Turn]]:
    """The merged and paired turns of a conversation: one whose turns were ``merged`` and
    ``paired``, continued with ``tail`` (its messages from ``start``, where the last merged
    turn begins). Only that last turn can grow, and only the turn before it can pair
    differently (a turn is paired by its neighbours): the others stand."""
    full = _merged(tail, list(merged[:-1]), offset=start)
    stand = max(0, len(merged) - 2)
    out = list(paired[:stand])
    out += [_paired(full[i], full, i) for i in range(stand, len(full))]
    return full, out


def _merged(messages: Sequence[Message], merged: list[Turn], *, offset: int = 0) -> list[Turn]:
    """``merged`` (the turns of the messages before ``offset``) followed by the turns of
    ``messages`` (which begin at ``offset``): consecutive messages of one role merge."""
    for index, message in enumerate(messages, offset):
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
    return merged


def _led(out: list[Turn], lead_in: str | None) -> list[Turn]:
    """``out`` with the ``lead_in`` user turn first when it starts with the assistant's."""
    if lead_in is not None and out and out[0].role == "assistant":
        out.insert(0, Turn(role="user", parts=(TextPart(text=lead_in),), origins=(-1,)))
    return out


_TOOL_PARTS = (ToolCallPart, ToolResultPart)


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
    """``turn`` with unpaired calls and results turned into text and results moved first
    (``turn`` itself when it has neither: most turns of a conversation)."""
    if not any(isinstance(p, _TOOL_PARTS) for p in turn.parts):
        return turn
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

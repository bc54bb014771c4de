"""History the host supplies with the request (``AssemblyRequest.history``), as session blocks
that obey the same rules as stored history: grouped into turns (a turn starts at each user
message), so a tool call is always kept or cut with its result.

A system message in the list becomes a trusted workspace block (it belongs to the system
prompt); a tool result whose call is not in the list, or a call with no result, is left out
with a warning, since providers refuse both.

A host passes its whole history with every request, and it usually only grew since the last
one: the blocks made for a session's last history are kept (``_Made``), and a history that
starts with it has only its new messages made into blocks (unless a call left out for want of
a result has its result now: then all are made again).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from lamina.hookspecs import hookimpl
from lamina.model.blocks import SESSION, WORKSPACE, Block, Provenance
from lamina.model.chunked import Chunked
from lamina.model.messages import Message, Part, ToolCallPart, ToolResultPart
from lamina.records import LayerProvider, ProviderContext

#: The plugin name, and the report's ``history_source`` for request history.
NAME = "history"
#: Sessions whose last history's blocks are kept; the least recently used is forgotten first.
SESSIONS = 256


@frozen(kw_only=True)
class _Made:
    """A history made into blocks, with what making more messages after it needs."""

    history: tuple[Message, ...]
    blocks: Chunked[Block]
    warnings: tuple[str, ...]
    answered: frozenset[str]  # the ids of the tool results in the history
    called: frozenset[str]  # the ids of the tool calls kept
    unanswered: frozenset[str]  # the ids of the tool calls left out (no result)
    turn: int  # the last turn's number (-1 before the first)


_made: OrderedDict[tuple[str, str], _Made] = OrderedDict()
_lock = threading.Lock()


def provide(ctx: ProviderContext) -> Sequence[Block]:
    history = ctx.request.history
    if not history:
        return []
    history = tuple(history)
    key = (ctx.plugin, ctx.request.session_label)
    with _lock:
        last = _made.get(key)
    made = _grown(last, history, ctx.plugin) if last is not None else None
    if made is None:
        made = _make(history, None, ctx.plugin)
    with _lock:
        _made[key] = made
        _made.move_to_end(key)
        while len(_made) > SESSIONS:
            _made.popitem(last=False)
    for warning in made.warnings:
        ctx.warn(warning)
    return made.blocks


def _grown(last: _Made, history: tuple[Message, ...], plugin: str) -> _Made | None:
    """``history`` made from ``last`` when it starts with ``last`` 's messages (compared by
    identity first, at C speed) and no call ``last`` left out has a result in it now."""
    if len(history) < len(last.history):
        return None
    try:
        starts = last.history <= history  # (messages have no order: a difference raises)
    except TypeError:
        return None
    if not starts:
        return None
    if len(history) == len(last.history):
        return last
    return _make(history, last, plugin)


def _make(history: tuple[Message, ...], base: _Made | None, plugin: str) -> _Made:
    """The blocks of ``history``, those of ``base`` 's messages reused (all made again when
    a call ``base`` left out is answered now)."""
    start = 0 if base is None else len(base.history)
    new = history[start:]
    answered = {p.call_id for m in new for p in m.content if isinstance(p, ToolResultPart)}
    if base is not None:
        if not base.unanswered.isdisjoint(answered):
            return _make(history, None, plugin)
        answered |= base.answered
    called = set() if base is None else set(base.called)
    unanswered = set() if base is None else set(base.unanswered)
    warnings = [] if base is None else list(base.warnings)
    turn = -1 if base is None else base.turn
    blocks: list[Block] = []
    for i, message in enumerate(new, start):
        if message.role == "system":
            blocks.append(_block(i, plugin, message.content, {}, layer=WORKSPACE, trusted=True))
            continue
        parts = _paired(message.content, answered, called, unanswered, i, warnings)
        if not parts:
            continue
        opens_turn = message.role == "user" and not any(
            isinstance(p, ToolResultPart) for p in parts
        )
        if opens_turn or turn < 0:
            turn += 1
        metadata = {"context_json": message.context_json} if message.context_json else {}
        group = f"history:turn:{turn}"
        blocks.append(
            _block(i, plugin, parts, metadata, layer=SESSION, role=message.role, group=group)
        )
    return _Made(
        history=history,
        blocks=Chunked(blocks) if base is None else base.blocks.grown(blocks),
        warnings=tuple(warnings),
        answered=frozenset(answered),
        called=frozenset(called),
        unanswered=frozenset(unanswered),
        turn=turn,
    )


def _block(
    index: int, plugin: str, content: tuple[Part, ...], metadata: dict[str, Any], **fields: Any
) -> Block:
    """The block of the message at ``index``."""
    provenance = Provenance(plugin=plugin, source_id=str(index), metadata=metadata)
    return Block(id=f"history:{index}", content=content, provenance=provenance, **fields)


def _paired(
    parts: Sequence[Part],
    answered: set[str],
    called: set[str],
    unanswered: set[str],
    index: int,
    warnings: list[str],
) -> tuple[Part, ...]:
    """The message's parts less tool calls with no result and results with no earlier call."""
    kept: list[Part] = []
    for part in parts:
        if isinstance(part, ToolCallPart):
            if part.id not in answered:
                warnings.append(f"history[{index}]: tool call {part.id!r} has no result; left out")
                unanswered.add(part.id)
                continue
            called.add(part.id)
        elif isinstance(part, ToolResultPart) and part.call_id not in called:
            warnings.append(
                f"history[{index}]: tool result for {part.call_id!r} has no call; left out"
            )
            continue
        kept.append(part)
    return tuple(kept)


@hookimpl
def lamina_layer_providers() -> list[LayerProvider]:
    return [
        LayerProvider(
            name=NAME,
            provide=provide,
            layers=(SESSION, WORKSPACE),
            description="the history a host passes with the request",
            inline=True,
        )
    ]

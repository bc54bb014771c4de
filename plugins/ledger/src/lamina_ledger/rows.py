"""Rows back into records: a turn with its messages (each decoded and checked once); records
into rows (messages checked to read back as given, counts a BIGINT holds); and the small helpers
the reader and writer share."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from typing import Any

from lamina import Message, ToolCallPart, ToolResultPart, Usage
from lamina_ledger.codec import dump_parts, load_context, load_parts, parts_hash
from lamina_ledger.errors import LedgerError
from lamina_ledger.records import Turn

ROLES = ("system", "user", "assistant", "tool")
TURN_COLUMNS = (
    "id, type, parent_id, thread_id, model, provider, total_tokens, input_tokens, "
    "cached_input_tokens, cache_creation_tokens, output_tokens, started_at, completed_at, "
    "counted_by"
)
#: The largest count a BIGINT column holds.
BIGINT = 2**63 - 1


def unanswered(messages: Iterator[Message] | Sequence[Message]) -> dict[str, None]:
    """The call ids of tool results in ``messages`` whose call does not come before them
    (in order, as a dict used as an ordered set)."""
    calls: set[str] = set()
    missing: dict[str, None] = {}
    for m in messages:
        for p in m.content:
            if isinstance(p, ToolCallPart):
                calls.add(p.id)
            elif isinstance(p, ToolResultPart) and p.call_id not in calls:
                missing.setdefault(p.call_id, None)
    return missing


def decode_turn(row: tuple[Any, ...], messages: list[tuple[Any, ...]], session: str | None) -> Turn:
    out, tokens, hashes = [], [], []
    for m in messages:
        try:
            parts = load_parts(m[3])
            context = load_context(m[4])
        except ValueError as exc:
            raise LedgerError(f"message {m[1]}: {exc}", session=session, turn=row[0]) from exc
        if m[2] not in ROLES:
            raise LedgerError(
                f"message {m[1]}: unknown role {m[2]!r}", session=session, turn=row[0]
            )
        out.append(Message(role=m[2], content=parts, context_json=context))
        tokens.append(m[5])
        hashes.append(m[6] if m[6] is not None else parts_hash(m[3]))
    usage = None
    if row[7] is not None:
        usage = Usage(
            input_tokens=int(row[7]),
            cached_input_tokens=int(row[8] or 0),
            cache_creation_tokens=int(row[9] or 0),
            output_tokens=int(row[10] or 0),
        )
    return Turn(
        id=row[0],
        type=row[1],
        parent_id=row[2],
        thread_id=row[3],
        model=row[4],
        provider=row[5],
        total_tokens=row[6],
        counted_by=row[13],
        usage=usage,
        started_at=row[11],
        completed_at=row[12],
        messages=tuple(out),
        message_tokens=tuple(tokens),
        message_hashes=tuple(hashes),
    )


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def message_rows(
    session: str,
    turn_id: str,
    messages: Sequence[Message],
    message_tokens: Sequence[int | None] | None,
) -> list[tuple[Any, ...]]:
    """The rows for ``messages``, each checked to read back as it was given."""
    if message_tokens is not None and len(message_tokens) != len(messages):
        raise LedgerError(
            f"{len(message_tokens)} message token counts for {len(messages)} messages",
            session=session,
            turn=turn_id,
        )
    rows = []
    for seq, m in enumerate(messages):
        if not isinstance(m, Message):
            raise LedgerError(
                f"message {seq} is a {type(m).__name__}, expected lamina.Message",
                session=session,
                turn=turn_id,
            )
        if m.role not in ROLES:
            raise LedgerError(
                f"message {seq} has unknown role {m.role!r}", session=session, turn=turn_id
            )
        try:
            content = dump_parts(m.content)
            load_parts(content)  # what cannot be read back is never written
            content.encode("utf-8")
            context = None
            if m.context_json is not None:
                context = json.dumps(m.context_json, sort_keys=True)
        except (ValueError, TypeError) as exc:
            raise LedgerError(
                f"message {seq} cannot be stored: {exc}", session=session, turn=turn_id
            ) from exc
        tokens = None if message_tokens is None else message_tokens[seq]
        check_count(tokens, f"message {seq}'s token count", session, turn_id)
        rows.append((turn_id, seq, m.role, content, context, tokens, parts_hash(content)))
    return rows


def check_count(value: int | None, what: str, session: str | None, turn: str) -> None:
    """A stored count is a whole number a BIGINT column holds."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= BIGINT:
        raise LedgerError(
            f"{what} must be a whole number from 0 to {BIGINT}, got {value!r}",
            session=session,
            turn=turn,
        )


def check_cost(value: float | None, session: str | None, turn: str) -> None:
    """A stored cost is a finite, non-negative number of dollars."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise LedgerError(
            f"cost must be a finite number, got {value!r}", session=session, turn=turn
        )
    if value < 0:
        raise LedgerError(f"cost must not be negative, got {value!r}", session=session, turn=turn)

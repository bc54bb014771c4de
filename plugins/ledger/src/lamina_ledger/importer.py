"""Import pi / OpenClaw-style JSONL session transcripts (``message`` and
``compaction{summary, firstKeptEntryId, tokensBefore}`` entries) into the ledger.

Entries are grouped into turns (a user message opens one; assistant messages and tool results
join it), so a tool call and its result always share a turn. The import is one transaction:
a bad line or a compaction pointing at a missing entry writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attrs import define, frozen

from lamina import ImagePart, Message, Part, TextPart, ToolCallPart, ToolResultPart, Usage
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger

#: Entry types that carry no conversation (settings changes, labels, extension state).
_IGNORED = {"model_change", "thinking_level_change", "custom", "label", "session_info"}


@frozen(kw_only=True)
class ImportResult:
    session: str
    turns: int
    compactions: int
    messages: int
    skipped: int


@define
class _Turn:
    id: str
    entries: list[str]
    messages: list[Message]
    usage: list[Usage]
    model: str | None = None
    provider: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


def _fail(session: str, path: Path, line: int, cause: str) -> LedgerError:
    return LedgerError(f"{path}:{line}: {cause}", session=session)


def _parts(content: Any, where: str) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=content),)
    if not isinstance(content, list):
        raise ValueError(f"{where}: content must be a string or a list")
    out: list[Part] = []
    for item in content:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "text":
            out.append(TextPart(text=str(item.get("text", ""))))
        elif kind == "image":
            out.append(
                ImagePart(media_type=str(item.get("mimeType", "image/png")), data=item.get("data"))
            )
        elif kind == "toolCall":
            args = item.get("arguments") or {}
            out.append(ToolCallPart(id=str(item["id"]), name=str(item["name"]), arguments=args))
        elif kind == "thinking":
            continue  # the model's private reasoning is not replayed
        else:
            raise ValueError(f"{where}: unknown content type {kind!r}")
    return tuple(out)


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    read, write = int(data.get("cacheRead", 0) or 0), int(data.get("cacheWrite", 0) or 0)
    return Usage(
        input_tokens=int(data.get("input", 0) or 0) + read + write,
        cached_input_tokens=read,
        cache_creation_tokens=write,
        output_tokens=int(data.get("output", 0) or 0),
    )


def _message(entry: dict[str, Any], where: str) -> tuple[Message | None, Usage | None]:
    msg = entry.get("message")
    if not isinstance(msg, dict):
        raise ValueError(f"{where}: a message entry needs a 'message' object")
    role = msg.get("role")
    if role == "user":
        return Message(role="user", content=_parts(msg.get("content", ""), where)), None
    if role == "assistant":
        parts = _parts(msg.get("content", []), where)
        return Message(role="assistant", content=parts), _usage(msg.get("usage"))
    if role == "toolResult":
        texts = [p.text for p in _parts(msg.get("content", []), where) if isinstance(p, TextPart)]
        part = ToolResultPart(
            call_id=str(msg["toolCallId"]),
            content="\n".join(texts),
            is_error=bool(msg.get("isError", False)),
        )
        return Message(role="tool", content=(part,)), None
    if role == "bashExecution":
        if msg.get("excludeFromContext"):
            return None, None
        text = f"$ {msg.get('command', '')}\n{msg.get('output', '')}"
        return Message.of("user", text), None
    if role in ("custom", "branchSummary", "compactionSummary"):
        body = msg.get("summary") if "summary" in msg else msg.get("content", "")
        return Message(role="user", content=_parts(body, where)), None
    raise ValueError(f"{where}: unknown message role {role!r}")


def read_entries(
    path: Path, session: str
) -> tuple[dict[str, Any] | None, list[tuple[int, dict[str, Any]]]]:
    """The header (if any) and the entries on the path from the root to the last entry."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}", session=session) from exc
    header, entries = None, []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _fail(session, path, n, f"not valid JSON ({exc.msg})") from exc
        if not isinstance(entry, dict) or "type" not in entry:
            raise _fail(session, path, n, "an entry must be an object with a 'type'")
        if entry["type"] == "session":
            header = entry
        else:
            entries.append((n, entry))
    if not entries or all("id" not in e for _, e in entries):
        return header, entries  # version 1: a linear sequence
    by_id = {e["id"]: (n, e) for n, e in entries if "id" in e}
    path_ids: list[str] = []
    cursor = entries[-1][1].get("id")
    seen: set[str] = set()
    while cursor is not None:
        if cursor in seen:
            raise _fail(session, path, by_id[cursor][0], f"parentId loop at entry {cursor!r}")
        seen.add(cursor)
        if cursor not in by_id:
            child = path_ids[-1] if path_ids else None
            at = by_id[child][0] if child else 0
            raise _fail(session, path, at, f"parentId {cursor!r} names no entry in the file")
        path_ids.append(cursor)
        cursor = by_id[cursor][1].get("parentId")
    return header, [by_id[i] for i in reversed(path_ids)]


def import_jsonl(ledger: Ledger, path: str | Path, session: str) -> ImportResult:
    """Import one transcript as ``session`` (which must not exist yet)."""
    path = Path(path)
    header, entries = read_entries(path, session)
    prefix = str((header or {}).get("id") or session)
    turns: list[_Turn] = []
    plan: list[tuple[str, Any]] = []  # ("turn", _Turn) | ("compaction", (n, entry))
    turn_of: dict[str, str] = {}
    current: _Turn | None = None
    skipped = 0
    for n, entry in entries:
        kind, where = entry["type"], f"{path}:{n}"
        eid = str(entry.get("id", f"line{n}"))
        if kind == "message" or kind == "custom_message":
            msg: Message | None
            try:
                if kind == "custom_message":
                    msg, usage = (
                        Message(role="user", content=_parts(entry.get("content", ""), where)),
                        None,
                    )
                else:
                    msg, usage = _message(entry, where)
            except (ValueError, KeyError, TypeError) as exc:
                raise _fail(session, path, n, str(exc)) from exc
            if msg is None:
                skipped += 1
                continue
            if current is None or (msg.role == "user" and current.messages and _closed(current)):
                current = _Turn(id=f"{prefix}/{eid}", entries=[], messages=[], usage=[])
                current.started_at = entry.get("timestamp")
                turns.append(current)
                plan.append(("turn", current))
            current.entries.append(eid)
            current.messages.append(msg)
            current.completed_at = entry.get("timestamp")
            if usage is not None:
                current.usage.append(usage)
                info = entry["message"]
                current.model = info.get("model", current.model)
                current.provider = info.get("provider", current.provider)
            turn_of[eid] = current.id
        elif kind == "compaction":
            current = None
            plan.append(("compaction", (n, entry)))
        elif kind in _IGNORED or kind == "branch_summary":
            skipped += 1
        else:
            raise _fail(session, path, n, f"unknown entry type {kind!r}")
    compactions = 0
    with ledger.batch(session):
        if session in ledger.sessions():
            raise LedgerError("the session already exists; import into a new one", session=session)
        for what, item in plan:
            if what == "turn":
                usage = _sum(item.usage)
                ledger.append_turn(
                    session,
                    item.messages,
                    usage=usage,
                    model=item.model,
                    provider=item.provider,
                    turn_id=item.id,
                    started_at=item.started_at,
                    completed_at=item.completed_at,
                )
                continue
            n, entry = item
            cid = f"{prefix}/{entry.get('id', f'line{n}')}"
            first = entry.get("firstKeptEntryId")
            kept = None
            if first is not None:
                kept = turn_of.get(str(first))
                if kept is None:
                    raise LedgerError(
                        f"{path}:{n}: compaction's firstKeptEntryId {first!r} is not a message "
                        "before it",
                        session=session,
                        turn=cid,
                    )
            if not isinstance(entry.get("summary"), str):
                raise LedgerError(
                    f"{path}:{n}: compaction has no summary", session=session, turn=cid
                )
            ledger.record_compaction(
                session,
                entry["summary"],
                kept,
                tokens_before=entry.get("tokensBefore"),
                trigger="manual" if entry.get("fromHook") else "context_limit",
                summarizer="imported",
                turn_id=cid,
                created_at=entry.get("timestamp"),
            )
            compactions += 1
    return ImportResult(
        session=session,
        turns=len(turns),
        compactions=compactions,
        messages=sum(len(t.messages) for t in turns),
        skipped=skipped,
    )


def _closed(turn: _Turn) -> bool:
    """A user message opens a new turn unless the current one is still waiting for results."""
    calls = {p.id for m in turn.messages for p in m.content if isinstance(p, ToolCallPart)}
    results = {p.call_id for m in turn.messages for p in m.content if isinstance(p, ToolResultPart)}
    return calls <= results


def _sum(usages: list[Usage]) -> Usage | None:
    if not usages:
        return None
    return Usage(
        input_tokens=sum(u.input_tokens for u in usages),
        cached_input_tokens=sum(u.cached_input_tokens for u in usages),
        cache_creation_tokens=sum(u.cache_creation_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
    )

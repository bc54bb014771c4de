"""Import pi / OpenClaw-style JSONL session transcripts (``message`` and
``compaction{summary, firstKeptEntryId, tokensBefore}`` entries) into the ledger.

Entries are grouped into turns (a user message opens one; assistant messages and tool results
join it), so a tool call and its result always share a turn. A malformed transcript is a
``TranscriptError`` naming the file, line and field, found before anything is written; the
import is one transaction. One transcript may be imported under several session names (each
import after the first gets its own turn ids)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import define, field, frozen

from lamina import ImagePart, Message, Part, TextPart, ToolCallPart, ToolResultPart, Usage
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger
from lamina_ledger.records import Trigger
from lamina_ledger.transcript import Line, kind, read_lines, split

if TYPE_CHECKING:
    from lamina import Progress

#: Entry types that carry no conversation (settings changes, labels, extension state).
_IGNORED = {"model_change", "thinking_level_change", "custom", "label", "session_info"}
_SUMMARIES = ("custom", "branchSummary", "compactionSummary")


@frozen(kw_only=True)
class ImportResult:
    session: str
    turns: int
    compactions: int
    messages: int
    skipped: int


@define
class _Turn:
    key: str
    messages: list[Message]
    usage: list[Usage]
    #: What each request of the turn cost as the transcript says (``None``: it does not).
    costs: list[float | None] = field(factory=list)
    model: str | None = None
    provider: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


@frozen(kw_only=True)
class _Compaction:
    key: str
    summary: str
    first_kept: str | None  # the key of the turn it keeps first
    tokens_before: int | None
    trigger: Trigger
    created_at: str | None


def _parts(line: Line, content: Any, field: str) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(text=_text(line, content, field)),)
    if not isinstance(content, list):
        raise line.fail(f"must be a string or an array of parts, got {kind(content)}", field)
    out: list[Part] = []
    for i, item in enumerate(content):
        at = f"{field}[{i}]"
        if not isinstance(item, dict):
            raise line.fail(f"a part must be an object, got {kind(item)}", at)
        part = line.text(item.get("type"), f"{at}.type")
        if part == "text":
            out.append(TextPart(text=_text(line, item.get("text"), f"{at}.text")))
        elif part == "image":
            media = _text(line, item.get("mimeType", "image/png"), f"{at}.mimeType")
            data = _text(line, item.get("data"), f"{at}.data")
            out.append(ImagePart(media_type=media, data=data))
        elif part == "toolCall":
            args = item.get("arguments")
            if args is not None and not isinstance(args, dict):
                raise line.fail(f"must be an object, got {kind(args)}", f"{at}.arguments")
            line.text(repr(args), f"{at}.arguments")  # every key and value valid Unicode
            call_id = _text(line, item.get("id"), f"{at}.id")
            name = _text(line, item.get("name"), f"{at}.name")
            out.append(ToolCallPart(id=call_id, name=name, arguments=args or {}))
        elif part == "thinking":
            continue  # the model's private reasoning is not replayed
        else:
            raise line.fail(f"unknown content type {part!r}", f"{at}.type")
    return tuple(out)


def _text(line: Line, value: Any, field: str) -> str:
    text = line.text(value, field)
    assert text is not None
    return text


def _usage(line: Line, data: Any) -> Usage | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise line.fail(f"must be an object, got {kind(data)}", "message.usage")
    read = line.count(data.get("cacheRead"), "message.usage.cacheRead")
    write = line.count(data.get("cacheWrite"), "message.usage.cacheWrite")
    fresh = line.count(data.get("input"), "message.usage.input")
    return Usage(
        input_tokens=line.whole(fresh + read + write, "message.usage.input"),
        cached_input_tokens=read,
        cache_creation_tokens=write,
        output_tokens=line.count(data.get("output"), "message.usage.output"),
    )


def _cost(line: Line, data: Any) -> float | None:
    """An assistant message's ``usage.cost.total`` (US dollars), when the transcript has it."""
    cost = data.get("cost") if isinstance(data, dict) else None
    total = cost.get("total") if isinstance(cost, dict) else None
    if total is None:
        return None
    ok = isinstance(total, int | float) and not isinstance(total, bool)
    if not ok or not math.isfinite(total) or total < 0:
        raise line.fail(f"must be a number of dollars, got {total!r}", "message.usage.cost.total")
    return float(total)


def _message(line: Line) -> tuple[Message | None, Usage | None]:
    """A ``message`` entry's message (``None``: excluded from context) and usage."""
    msg = line.entry.get("message")
    if not isinstance(msg, dict):
        raise line.fail(f"a message entry needs a 'message' object, got {kind(msg)}", "message")
    role = msg.get("role")
    if role == "user":
        content = _parts(line, msg.get("content", ""), "message.content")
        return Message(role="user", content=content), None
    if role == "assistant":
        content = _parts(line, msg.get("content", []), "message.content")
        return Message(role="assistant", content=content), _usage(line, msg.get("usage"))
    if role == "toolResult":
        parts = _parts(line, msg.get("content", []), "message.content")
        result = ToolResultPart(
            call_id=_text(line, msg.get("toolCallId"), "message.toolCallId"),
            content="\n".join(p.text for p in parts if isinstance(p, TextPart)),
            is_error=line.flag(msg.get("isError"), "message.isError"),
        )
        return Message(role="tool", content=(result,)), None
    if role == "bashExecution":
        if line.flag(msg.get("excludeFromContext"), "message.excludeFromContext"):
            return None, None
        command = _text(line, msg.get("command", ""), "message.command")
        output = _text(line, msg.get("output", ""), "message.output")
        return Message.of("user", f"$ {command}\n{output}"), None
    if role in _SUMMARIES:
        field = "message.summary" if "summary" in msg else "message.content"
        content = _parts(line, msg.get("summary", msg.get("content", "")), field)
        return Message(role="user", content=content), None
    raise line.fail(f"unknown message role {role!r}", "message.role")


def plan(path: Path, session: str) -> tuple[str, list[_Turn | _Compaction], int]:
    """The transcript read and checked whole: its id (the header's, else ``session``), its
    turns and compactions in order, and how many entries were skipped."""
    header, entries = split(read_lines(path, session))
    prefix = (header.entry.get("id") if header is not None else None) or session
    steps: list[_Turn | _Compaction] = []
    turn_of: dict[str, str] = {}  # entry id -> key of the turn holding it
    calls: set[str] = set()
    current: _Turn | None = None
    skipped = 0
    for line in entries:
        entry_type, key = line.entry["type"], line.entry.get("id") or f"line{line.number}"
        if entry_type in ("message", "custom_message"):
            msg: Message | None
            if entry_type == "custom_message":
                content = _parts(line, line.entry.get("content", ""), "content")
                msg, usage = Message(role="user", content=content), None
            else:
                msg, usage = _message(line)
            if msg is None:
                skipped += 1
                continue
            _check_results(line, msg, calls)
            stamp = line.text(line.entry.get("timestamp"), "timestamp", required=False)
            if current is None or (msg.role == "user" and current.messages and _closed(current)):
                current = _Turn(key=key, messages=[], usage=[], started_at=stamp)
                steps.append(current)
            turn_of[key] = current.key
            current.messages.append(msg)
            current.completed_at = stamp or current.completed_at
            if usage is not None:
                current.usage.append(usage)
                current.costs.append(_cost(line, line.entry["message"].get("usage")))
                total = _sum(current.usage)
                assert total is not None
                line.whole(total.input_tokens, "message.usage.input")  # the turn's sum fits too
                line.whole(total.output_tokens, "message.usage.output")
                info = line.entry["message"]
                model = line.text(info.get("model"), "message.model", required=False)
                provider = line.text(info.get("provider"), "message.provider", required=False)
                current.model, current.provider = (
                    model or current.model,
                    provider or current.provider,
                )
        elif entry_type == "compaction":
            current = None
            steps.append(_compaction(line, key, turn_of))
        elif entry_type in _IGNORED or entry_type == "branch_summary":
            skipped += 1
        else:
            raise line.fail(f"unknown entry type {entry_type!r}", "type")
    return str(prefix), steps, skipped


def _check_results(line: Line, msg: Message, calls: set[str]) -> None:
    """A tool result must follow its call: a session holding one without could not be read."""
    for p in msg.content:
        if isinstance(p, ToolCallPart):
            calls.add(p.id)
        elif isinstance(p, ToolResultPart) and p.call_id not in calls:
            raise line.fail(
                f"no tool call {p.call_id!r} comes before this tool result", "message.toolCallId"
            )


def _compaction(line: Line, key: str, turn_of: dict[str, str]) -> _Compaction:
    summary = _text(line, line.entry.get("summary"), "summary")
    first = line.text(line.entry.get("firstKeptEntryId"), "firstKeptEntryId", required=False)
    if first is not None and first not in turn_of:
        raise line.fail(
            f"firstKeptEntryId {first!r} is not a message before it",
            "firstKeptEntryId",
        )
    before = line.entry.get("tokensBefore")
    return _Compaction(
        key=key,
        summary=summary,
        first_kept=None if first is None else turn_of[first],
        tokens_before=None if before is None else line.whole(before, "tokensBefore"),
        trigger="manual" if line.flag(line.entry.get("fromHook"), "fromHook") else "context_limit",
        created_at=line.text(line.entry.get("timestamp"), "timestamp", required=False),
    )


def import_jsonl(
    ledger: Ledger, path: str | Path, session: str, *, progress: Progress | None = None
) -> ImportResult:
    """Import one transcript as ``session`` (which must not exist yet). A turn's cost is the
    transcript's (``usage.cost.total``) when every request of it has one, else models.dev's
    price of its usage. ``progress`` counts the turns and compactions as they are written."""
    prefix, steps, skipped = plan(Path(path), session)
    if progress is not None:
        progress.update(0, total=len(steps))
    with ledger.batch(session):
        if session in ledger.sessions():
            raise LedgerError("the session already exists; import into a new one", session=session)
        if ledger.known_turns([f"{prefix}/{s.key}" for s in steps]):
            # imported before, under another name: this copy's turn ids name its session
            label = hashlib.blake2b(session.encode("utf-8", "surrogatepass"), digest_size=6)
            prefix = f"{prefix}@{label.hexdigest()}"
        ledger.create_session(session)
        for step in steps:
            if isinstance(step, _Turn):
                ledger.append_turn(
                    session,
                    step.messages,
                    usage=_sum(step.usage),
                    model=step.model,
                    provider=step.provider,
                    turn_id=f"{prefix}/{step.key}",
                    started_at=step.started_at,
                    completed_at=step.completed_at,
                    cost=_total(step.costs),
                )
            else:
                ledger.record_compaction(
                    session,
                    step.summary,
                    None if step.first_kept is None else f"{prefix}/{step.first_kept}",
                    tokens_before=step.tokens_before,
                    trigger=step.trigger,
                    summarizer="imported",
                    turn_id=f"{prefix}/{step.key}",
                    created_at=step.created_at,
                )
            if progress is not None:
                progress.advance()
    turns = [s for s in steps if isinstance(s, _Turn)]
    return ImportResult(
        session=session,
        turns=len(turns),
        compactions=len(steps) - len(turns),
        messages=sum(len(t.messages) for t in turns),
        skipped=skipped,
    )


def _closed(turn: _Turn) -> bool:
    """A user message opens a new turn unless the current one is still waiting for results."""
    calls = {p.id for m in turn.messages for p in m.content if isinstance(p, ToolCallPart)}
    results = {p.call_id for m in turn.messages for p in m.content if isinstance(p, ToolResultPart)}
    return calls <= results


def _total(costs: list[float | None]) -> float | None:
    """The turn's cost from the transcript: the sum, when every request has one."""
    if not costs or any(c is None for c in costs):
        return None
    return sum(c for c in costs if c is not None)


def _sum(usages: list[Usage]) -> Usage | None:
    if not usages:
        return None
    return Usage(
        input_tokens=sum(u.input_tokens for u in usages),
        cached_input_tokens=sum(u.cached_input_tokens for u in usages),
        cache_creation_tokens=sum(u.cache_creation_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
    )

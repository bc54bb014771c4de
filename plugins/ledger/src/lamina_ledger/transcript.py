"""Reading a pi / OpenClaw JSONL transcript strictly: every line JSON, every field of the
expected type, every text valid Unicode, every count a whole number a ledger can hold, every
tool result after its call. Anything else is a ``TranscriptError`` naming the file, the line
and the field; nothing is guessed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from attrs import frozen

from lamina_ledger.errors import LedgerError, TranscriptError

#: The largest count a ledger stores (a BIGINT).
MAX_COUNT = 2**63 - 1


@frozen(kw_only=True)
class Line:
    """One entry of the transcript and where it is, to name in errors."""

    number: int
    entry: dict[str, Any]
    file: str
    session: str

    def fail(self, cause: str, field: str | None = None) -> TranscriptError:
        """The error for this line: ``cause``, naming ``field`` (a path such as
        ``message.content[0].text``) unless the cause does."""
        return TranscriptError(
            cause, session=self.session, file=self.file, line=self.number, field=field
        )

    def get(self, *path: str) -> Any:
        value: Any = self.entry
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def text(self, value: Any, field: str, *, required: bool = True) -> str | None:
        """``value`` as a string (``None`` when absent and not ``required``)."""
        if value is None and not required:
            return None
        if not isinstance(value, str):
            raise self.fail(f"must be a string, got {kind(value)}", field)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise self.fail(
                f"is not valid Unicode (a lone surrogate at {exc.start})", field
            ) from exc
        return value

    def count(self, value: Any, field: str) -> int:
        """``value`` as a token count: a whole number from 0 (absent or null: 0)."""
        if value is None:
            return 0
        return self.whole(value, field)

    def whole(self, value: Any, field: str) -> int:
        """``value`` as a whole number a ledger can store."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"must be a whole number, got {kind(value)}", field)
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise self.fail(f"must be a whole number, got {value!r}", field)
        if not 0 <= value <= MAX_COUNT:
            raise self.fail(f"must be from 0 to {MAX_COUNT}, got {value!r}", field)
        return int(value)

    def flag(self, value: Any, field: str) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self.fail(f"must be true or false, got {kind(value)}", field)
        return value


def kind(value: Any) -> str:
    """The JSON name of ``value``'s type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def read_lines(path: Path, session: str) -> list[Line]:
    """The transcript's non-blank lines as JSON objects with a string ``type``."""
    where = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}", session=session) from exc
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark: not content
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TranscriptError(
            f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            session=session,
            file=where,
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from exc
    out: list[Line] = []
    for number, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)  # NaN, Infinity, 1e999: floats the fields then refuse
        except json.JSONDecodeError as exc:
            raise TranscriptError(
                f"not valid JSON ({exc.msg} at column {exc.colno})",
                session=session,
                file=where,
                line=number,
            ) from exc
        except RecursionError as exc:
            raise TranscriptError(
                "not valid JSON (nested too deeply)", session=session, file=where, line=number
            ) from exc
        at = Line(number=number, entry=entry, file=where, session=session)
        if not isinstance(entry, dict):
            raise at.fail(f"an entry must be a JSON object, got {kind(entry)}")
        at.text(entry.get("type"), "type")
        out.append(at)
    if not out:
        raise TranscriptError(
            "the transcript is empty (no header, no entries)", session=session, file=where
        )
    return out


def split(lines: list[Line]) -> tuple[Line | None, list[Line]]:
    """The header (the last ``session`` line) and the entries on the path from the root to
    the last entry (every entry in order when none has an ``id``: a version 1 transcript)."""
    header, entries = None, []
    for line in lines:
        if line.entry["type"] == "session":
            line.text(line.entry.get("id"), "id", required=False)
            header = line
        else:
            entries.append(line)
    if not any("id" in e.entry for e in entries):
        return header, entries
    by_id: dict[str, Line] = {}
    for e in entries:
        eid = e.text(e.entry.get("id"), "id")
        assert eid is not None
        e.text(e.entry.get("parentId"), "parentId", required=False)
        if eid in by_id:
            raise e.fail(f"duplicate entry id {eid!r} (also on line {by_id[eid].number})", "id")
        by_id[eid] = e
    path: list[Line] = []
    seen: set[str] = set()
    cursor: str | None = entries[-1].entry["id"]
    while cursor is not None:
        at = by_id.get(cursor)
        if at is None:
            child = path[-1]
            raise child.fail(f"parentId {cursor!r} names no entry in the file", "parentId")
        if cursor in seen:
            raise at.fail(f"parentId loop at entry {cursor!r}", "parentId")
        seen.add(cursor)
        path.append(at)
        cursor = at.entry.get("parentId")
    return header, path[::-1]

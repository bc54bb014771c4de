"""Bulk import: memories from JSON (a list) or JSON Lines, one object per memory with a ``kind``.

Every problem names the file, the record (index or line) and the field; nothing is
half-imported. Refused: text that is not UTF-8, NaN or infinite numbers (``NaN``,
``Infinity``, ``1e999``), strings a store cannot hold (a NUL, a lone surrogate), nesting
deeper than 64 levels, and two records of one kind with one id (the second would silently
replace the first).

A file's memories are written in batches of ``IMPORT_BATCH`` (``MemoryService.import_file``);
``ImportProgress`` says how far an import got.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from lamina import ConfigError, SerdeError, structure
from lamina_memory.content import first_problem
from lamina_memory.records import (
    KIND_OF,
    KINDS,
    Chunk,
    Entity,
    EpisodicEvent,
    Memory,
    Pattern,
    Relation,
)

#: Memories written (and embedded) per transaction by an import.
IMPORT_BATCH = 256

CLASSES: dict[str, type] = {
    "event": EpisodicEvent,
    "chunk": Chunk,
    "entity": Entity,
    "relation": Relation,
    "pattern": Pattern,
}


@attrs.frozen(kw_only=True)
class ImportProgress:
    """How far an import got: memories in the file, where this run started (a resumed import
    starts after what an earlier run wrote), how many are written, and how many were embedded
    in how many seconds."""

    total: int
    start: int = 0
    done: int = 0
    embedded: int = 0
    started: float = 0.0
    elapsed: float = 0.0

    @property
    def written(self) -> int:
        """Memories this run wrote."""
        return self.done - self.start

    @property
    def rate(self) -> float:
        """Embeddings per second in this run."""
        return self.embedded / self.elapsed if self.elapsed > 0 else 0.0


def parse_memory(data: Any, *, where: str) -> Memory:
    """One memory from plain data (``{"kind": ..., ...}``); errors say ``where``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
    problem = first_problem(data)
    if problem is not None:
        field, what = problem
        raise ConfigError(f"{where}: field {field}: {what}")
    kind = data.get("kind")
    if kind not in CLASSES:
        raise ConfigError(f"{where}: field kind must be one of {', '.join(KINDS)}, got {kind!r}")
    fields = {k: v for k, v in data.items() if k != "kind"}
    try:
        memory: Memory = structure(fields, CLASSES[kind], what=f"{kind} at {where}")
    except SerdeError:
        raise
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: invalid {kind}: {exc}") from exc
    return memory


def parse_memories(records: Iterable[tuple[str, Any]], *, source: str) -> list[Memory]:
    """Every ``(where, record)`` parsed, all or nothing; a second record of one kind with an
    id already seen is an error naming both places."""
    out: list[Memory] = []
    seen: dict[tuple[str, str], str] = {}
    for where, data in records:
        memory = parse_memory(data, where=f"{source} {where}")
        key = (KIND_OF[type(memory)], memory.id)
        first = seen.setdefault(key, where)
        if first != where:
            raise ConfigError(
                f"{source}: {key[0]} id {memory.id!r} is on {first} and again on {where}; ids "
                "must be unique within one import (nothing was imported)"
            )
        out.append(memory)
    return out


def _json(text: str, *, file: str, line: int | None = None) -> Any:
    """Parsed JSON; bad JSON names the line (``line``: of a JSON Lines record)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if line is None:
            message = f"not valid JSON (line {exc.lineno}): {exc.msg}"
        else:
            message = f"line {line}: not valid JSON: {exc.msg}"
        raise ConfigError(message, file=file) from exc
    except RecursionError as exc:
        where = "data" if line is None else f"line {line}"
        raise ConfigError(f"{where}: nested too deeply", file=file) from exc


def read_text(path: Path) -> str:
    """The file as text; unreadable or not UTF-8 is a ``ConfigError`` naming the file (and
    the line and byte of the first bad byte)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read memory import file: {exc.strerror}", file=str(path)
        ) from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            file=str(path),
        ) from exc


def load_file(path: str | Path) -> list[Memory]:
    """Memories from a ``.json`` file (a list of objects) or a ``.jsonl`` file (one per line)."""
    p = Path(path)
    text = read_text(p)
    if p.suffix == ".jsonl":
        records = [
            (f"line {n}", _json(line, file=str(p), line=n))
            for n, line in enumerate(text.split("\n"), start=1)
            if line.strip()
        ]
        return parse_memories(records, source=str(p))
    data = _json(text, file=str(p))
    if not isinstance(data, list):
        raise ConfigError("expected a JSON list of memories", file=str(p))
    return parse_memories(((f"record {i}", r) for i, r in enumerate(data)), source=str(p))

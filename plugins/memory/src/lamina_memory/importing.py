"""Bulk import: memories from JSON (a list) or JSON Lines, one object per memory with a ``kind``.

Every problem names the file, the record (index or line) and the field; nothing is half-imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lamina import ConfigError, SerdeError, structure
from lamina_memory.records import KINDS, Chunk, Entity, EpisodicEvent, Memory, Pattern, Relation

CLASSES: dict[str, type] = {
    "event": EpisodicEvent,
    "chunk": Chunk,
    "entity": Entity,
    "relation": Relation,
    "pattern": Pattern,
}


def parse_memory(data: Any, *, where: str) -> Memory:
    """One memory from plain data (``{"kind": ..., ...}``); errors say ``where``."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
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


def parse_memories(records: Iterable[Any], *, source: str) -> list[Memory]:
    """Every record parsed (all or nothing)."""
    return [parse_memory(r, where=f"{source} record {i}") for i, r in enumerate(records)]


def load_file(path: str | Path) -> list[Memory]:
    """Memories from a ``.json`` file (a list of objects) or a ``.jsonl`` file (one per line)."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read memory import file: {exc.strerror}", file=str(p)) from exc
    if p.suffix == ".jsonl":
        out = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"line {n}: not valid JSON: {exc.msg}", file=str(p)) from exc
            out.append(parse_memory(data, where=f"{p} line {n}"))
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON (line {exc.lineno}): {exc.msg}", file=str(p)) from exc
    if not isinstance(data, list):
        raise ConfigError("expected a JSON list of memories", file=str(p))
    return parse_memories(data, source=str(p))

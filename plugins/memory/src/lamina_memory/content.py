"""What a store cannot hold, found before it reaches a database driver: text with a NUL or a
lone surrogate (neither SQLite's UTF-8 nor PostgreSQL accept them) and numbers that are not
finite. Each problem is named with the field's path, so imports and writes say where it is."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

#: Nesting deeper than this in imported data is refused (JSON parsers and encoders recurse).
MAX_DEPTH = 64


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None: a NUL character or a lone surrogate."""
    if text.isascii():
        pos = text.find("\x00")
        return None if pos < 0 else f"a NUL character at offset {pos}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate U+{ord(text[exc.start]):04X} at offset {exc.start}"
    pos = text.find("\x00")
    return None if pos < 0 else f"a NUL character at offset {pos}"


def number_problem(value: float) -> str | None:
    """Why ``value`` cannot be stored, or None: NaN and the infinities are not numbers a store
    (or a similarity score) can use, nor integers beyond 64 bits."""
    if isinstance(value, int):
        return None if -(2**63) <= value < 2**63 else f"{value} is beyond 64-bit integers"
    return None if math.isfinite(value) else f"{value!r} is not a finite number"


def problems(data: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every ``(path, problem)`` in plain data: strings (keys too), floats, nested lists and
    tables (``embedding[2]``, ``properties.name``); too deep a nesting is itself a problem."""
    stack: list[tuple[str, Any, int]] = [(path, data, 0)]
    while stack:
        where, value, depth = stack.pop()
        if isinstance(value, str):
            found = text_problem(value)
        elif isinstance(value, float | int):
            found = number_problem(value)
        elif depth >= MAX_DEPTH and isinstance(value, Mapping | list | tuple):
            found = f"nested deeper than {MAX_DEPTH} levels"
        elif isinstance(value, Mapping):
            found = None
            for key, item in reversed(list(value.items())):
                name = str(key)
                key_problem = text_problem(name)
                if key_problem is not None:
                    yield (where or "(top)", f"a key with {key_problem}")
                    continue
                stack.append((f"{where}.{name}" if where else name, item, depth + 1))
        elif isinstance(value, list | tuple):
            found = None
            for i in reversed(range(len(value))):
                stack.append((f"{where}[{i}]", value[i], depth + 1))
        else:
            found = None
        if found is not None:
            yield (where or "(top)", found)


def first_problem(data: Any) -> tuple[str, str] | None:
    """The first ``(path, problem)`` in ``data``, or None when a store can hold all of it."""
    return next(problems(data), None)

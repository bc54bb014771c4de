"""Cap a tool call's arguments, as tool results are capped: an agent that writes a whole file
through a call (``write_file`` with the file as an argument) would otherwise leave a turn no
request can hold until it is older than the protected newest turns.

The longest string among the arguments is cut to its head and tail around a marker, again
while their JSON is over the cap; when strings cannot bring it under (a huge key, thousands of
short strings), the arguments become one string saying what was left out. The arguments stay
JSON of the same shape, and the cut is deterministic, so the cache prefix survives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from lamina.assembly.measure import arguments_json
from lamina.records import Tokenizer

#: Cuts tried; each takes what the re-count found over the cap off the longest string.
_ROUNDS = 4
#: Where arguments that cannot be cut are said to be left out.
LEFT_OUT = "lamina_left_out"
Path = tuple[str | int, ...]


def around(text: str, bounds: Sequence[int], room: int, marker: str) -> str:
    """``text`` cut to ``room`` of its tokens (``bounds``: where each starts), the head
    getting the odd one, around ``marker``."""
    head_tokens = (room + 1) // 2
    tail_tokens = room - head_tokens
    head = text[: bounds[head_tokens]] if head_tokens < len(bounds) else text
    tail = text[bounds[len(bounds) - tail_tokens] :] if tail_tokens else ""
    return head + marker + tail


def capped_arguments(
    arguments: dict[str, Any], cap: int, total: int, marker: str, tokenizer: Tokenizer
) -> dict[str, Any]:
    """``arguments`` (``total`` tokens as JSON) cut to at most ``cap`` tokens: the longest
    string cut around ``marker`` until they fit, else ``{LEFT_OUT: marker}``."""
    current, over = arguments, total - cap
    cut: dict[Path, tuple[str, int]] = {}  # where a string was cut: it whole, tokens kept
    for _ in range(_ROUNDS):
        if over <= 0:
            return current
        found = _longest(current, ())
        if found is None:
            break
        path, text = found
        if path in cut:  # cut already and still over: keep that many fewer of its tokens
            text, room = cut[path]
            room -= over
        else:
            # What the string costs inside the JSON (escaped) against its own tokens, so the
            # cut, in its own tokens, takes ``over`` off the JSON.
            raw = tokenizer.count(text)
            inside = tokenizer.count(json.dumps(text, ensure_ascii=False))
            room = inside - over - tokenizer.count(json.dumps(marker, ensure_ascii=False))
            room = room * raw // max(1, inside)
        if room <= 0:
            break
        cut[path] = (text, room)
        current = _replaced(current, path, around(text, tokenizer.boundaries(text), room, marker))
        over = tokenizer.count(arguments_json(current)) - cap
    if over <= 0:
        return current
    return {LEFT_OUT: marker.strip()}


def _longest(value: Any, path: Path) -> tuple[Path, str] | None:
    """The longest string value anywhere in ``value`` and where it is (the first of equals)."""
    if isinstance(value, str):
        return path, value
    best: tuple[Path, str] | None = None
    if isinstance(value, dict):
        items: Any = sorted(value.items())  # the order the JSON has
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _longest(item, (*path, key))
        if found is not None and (best is None or len(found[1]) > len(best[1])):
            best = found
    return best


def _replaced(value: Any, path: Path, new: str) -> Any:
    """``value`` with ``new`` at ``path`` (copied along the path; the rest shared)."""
    if not path:
        return new
    key, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, key: _replaced(value[key], rest, new)}
    changed = list(value)
    changed[key] = _replaced(value[key], rest, new)  # type: ignore[index]
    return changed

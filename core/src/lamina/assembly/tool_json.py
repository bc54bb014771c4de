"""The tools a request offers, as JSON, made once per ``Tool`` object.

A host passes the same tools with every request; with hundreds of them, serializing each again
(for what the definitions cost in tokens, and for the stable prefix's hash, which covers them)
took milliseconds a request. A tool is immutable, so what is made for it holds while the same
object comes back; an equal tool in a new object is made again (``Tool`` holds a dict, so it
has no hash to find equal ones by).
"""

from __future__ import annotations

import hashlib
import json
import operator
import threading
from collections.abc import Sequence

from lamina.model.request import Tool
from lamina.serde import unstructure

#: Tools whose JSON is kept; past it, everything kept is forgotten at once.
KEPT = 4096

# id(tool) -> (the tool, kept alive so its id is not reused; its definition as counted; as
# the stable prefix's hash covers it)
_made: dict[int, tuple[Tool, str, str]] = {}
# ids of a list of tools -> (the tools, the digest of their JSON list so far)
_lists: dict[tuple[int, ...], tuple[tuple[Tool, ...], hashlib._Hash]] = {}
#: Lists of tools whose digest is kept.
LISTS_KEPT = 64
_lock = threading.Lock()


def _made_for(tool: Tool) -> tuple[Tool, str, str]:
    found = _made.get(id(tool))
    if found is not None and found[0] is tool:
        return found
    counted = json.dumps(
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema},
        sort_keys=True,
        ensure_ascii=False,
    )
    hashed = json.dumps(unstructure(tool), sort_keys=True, ensure_ascii=False)
    made = (tool, counted, hashed)
    with _lock:
        if len(_made) >= KEPT:
            _made.clear()
        _made[id(tool)] = made
    return made


def counted_json(tool: Tool) -> str:
    """The tool's definition as its token cost is counted: name, description, input schema."""
    return _made_for(tool)[1]


def tools_digest(tools: Sequence[Tool]) -> str | None:
    """The sha256 of the tools' JSON list (every field, keys sorted), ``None`` without tools."""
    return _listed(tools).hexdigest() if tools else None


def with_tools(prefix_sha256: str, tools: Sequence[Tool]) -> str:
    """The stable prefix's hash, covering the tool definitions sent with it (if any): the
    sha256 of the tools' JSON list, a NUL and the prefix's hash."""
    if not tools:
        return prefix_sha256
    digest = _listed(tools).copy()
    digest.update(f"\x00{prefix_sha256}".encode())
    found: str = digest.hexdigest()
    return found


def _listed(tools: Sequence[Tool]) -> hashlib._Hash:
    """The digest of the tools' JSON list so far, kept for the same tool objects in the same
    order (copy it before adding to it)."""
    key = tuple(map(id, tools))
    found = _lists.get(key)
    if found is None or not all(map(operator.is_, found[0], tools)):
        definitions = "[" + ", ".join(_made_for(t)[2] for t in tools) + "]"
        found = (tuple(tools), hashlib.sha256(definitions.encode()))
        with _lock:
            if len(_lists) >= LISTS_KEPT:
                _lists.clear()
            _lists[key] = found
    return found[1]

"""Tool filtering: by the caller's permissions (the Broker design's IAM-filtered tools), and a
worker's tools scoped to its task (the Broker design's manager-versus-worker table: a worker
gets task-relevant tools only, no messaging unless explicitly tasked)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from lamina.hookspecs import hookimpl
from lamina.model.request import AssemblyRequest, Tool
from lamina.records import ToolFilter

#: The request metadata key naming a worker's tool scope: tool names, permissions or globs.
TOOL_SCOPE = "tool_scope"
_WORD = re.compile(r"[\w.:-]+")


def permitted(tool: Tool, request: AssemblyRequest) -> bool:
    """A tool with no ``permission`` is open to all; otherwise a granted pattern must match it."""
    if tool.permission is None:
        return True
    return any(fnmatchcase(tool.permission, granted) for granted in request.permissions)


def _scope(request: AssemblyRequest) -> tuple[str, ...]:
    raw = request.metadata.get(TOOL_SCOPE) or ()
    items: Iterable[object] = (raw,) if isinstance(raw, str) else raw
    return tuple(str(x).casefold() for x in items)


def in_scope(tool: Tool, request: AssemblyRequest) -> bool:
    """Whether a worker may have ``tool``: a tool anyone may have (no ``permission``) always;
    otherwise one that ``metadata["tool_scope"]`` names (name, permission or glob), or, with
    no scope given, one whose name or permission the task names as a word. Managers and
    unified agents are not scoped."""
    if request.role != "worker" or tool.permission is None:
        return True
    keys = (tool.name.casefold(), tool.permission.casefold())
    scope = _scope(request)
    if scope:
        return any(fnmatchcase(key, pattern) for key in keys for pattern in scope)
    words = {w.casefold().strip(".:") for w in _WORD.findall(request.task or "")}
    return any(key in words for key in keys)


@hookimpl
def lamina_tool_filters() -> list[ToolFilter]:
    return [
        ToolFilter(
            name="permissions",
            allows=permitted,
            description="offer a tool only when the caller holds its permission (glob patterns)",
        ),
        ToolFilter(
            name="worker-scope",
            allows=in_scope,
            description="a worker gets only the permissioned tools its task or tool_scope names",
        ),
    ]

"""Tool filtering by the caller's permissions (the Broker design's IAM-filtered tools)."""

from __future__ import annotations

from fnmatch import fnmatchcase

from lamina.hookspecs import hookimpl
from lamina.model.request import AssemblyRequest, Tool
from lamina.records import ToolFilter


def permitted(tool: Tool, request: AssemblyRequest) -> bool:
    """A tool with no ``permission`` is open to all; otherwise a granted pattern must match it."""
    if tool.permission is None:
        return True
    return any(fnmatchcase(tool.permission, granted) for granted in request.permissions)


@hookimpl
def lamina_tool_filters() -> list[ToolFilter]:
    return [
        ToolFilter(
            name="permissions",
            allows=permitted,
            description="offer a tool only when the caller holds its permission (glob patterns)",
        )
    ]

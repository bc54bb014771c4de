"""The model's side of the working-set protocol's updates: tool definitions a host offers
(``request.tools``) and the handler that applies a call to the manifest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lamina import LaminaError, Tool
from lamina_workspace.manifest import ROLES, STRATEGIES, Manifest
from lamina_workspace.updates import apply_updates
from lamina_workspace.where import Workspace

_WHY = {"type": "string", "minLength": 1, "description": "Why this change helps the task."}
_PATH = {"type": "string", "description": "File path relative to the workspace root."}
_PRIORITY = {"type": "number", "minimum": 0.0, "maximum": 1.0}

WORKING_SET_TOOLS: tuple[Tool, ...] = (
    Tool(
        name="add_to_working_set",
        description="Add a file to your working set so it is in context from the next turn.",
        input_schema={
            "type": "object",
            "properties": {
                "path": _PATH,
                "priority": _PRIORITY,
                "role": {"type": "string", "enum": list(ROLES)},
                "truncate_strategy": {"type": "string", "enum": list(STRATEGIES)},
                "max_lines": {"type": "integer", "minimum": 1},
                "why": _WHY,
            },
            "required": ["path", "why"],
            "additionalProperties": False,
        },
    ),
    Tool(
        name="remove_from_working_set",
        description="Remove a file you no longer need from your working set.",
        input_schema={
            "type": "object",
            "properties": {"path": _PATH, "why": _WHY},
            "required": ["path", "why"],
            "additionalProperties": False,
        },
    ),
    Tool(
        name="adjust_priority",
        description="Change how important a working-set file is (1.0 = always included).",
        input_schema={
            "type": "object",
            "properties": {"path": _PATH, "priority": _PRIORITY, "why": _WHY},
            "required": ["path", "priority", "why"],
            "additionalProperties": False,
        },
    ),
)


def handle_tool_call(ws: Workspace, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
    """Apply one tool call; returns (result text for the model, is_error). Refusals are
    returned to the model as errors rather than raised, so it can correct itself."""
    try:
        (change,) = apply_updates(ws, [{**arguments, "action": name}], actor="model")
    except LaminaError as exc:
        return f"refused: {exc}", True
    return f"{change.action} {change.path}: done", False


def mentioned_paths(manifest: Manifest, text: str) -> list[str]:
    """Working-set paths that ``text`` (say, the model's last reply) mentions, for
    ``bump_referenced``: whole-path matches only, in manifest order."""
    found = []
    for entry in manifest.files:
        pattern = rf"(?<![\w/.-]){re.escape(entry.path)}(?![\w/-]|\.\w)"
        if re.search(pattern, text):
            found.append(entry.path)
    return found

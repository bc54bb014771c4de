"""Orchestrator-initiated working-set updates: add recent tool outputs, remove old ones, bump
recently referenced files, demote files unused for some turns. Each goes through
``apply_updates`` (atomic, logged) with actor ``orchestrator``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime

from lamina import plural
from lamina_workspace.beneath import FileRefused, open_regular
from lamina_workspace.manifest import Manifest, read_manifest
from lamina_workspace.updates import Change, apply_updates
from lamina_workspace.where import Workspace


def _manifest(ws: Workspace) -> Manifest:
    return read_manifest(ws.root, ws.manifest)


def _mtime(ws: Workspace, path: str) -> float:
    """When ``path`` was last modified (``-inf`` when it cannot be opened)."""
    try:
        fd, st = open_regular(ws.root, path)
    except FileRefused:
        return float("-inf")
    os.close(fd)
    return st.st_mtime


def add_tool_output(
    ws: Workspace,
    path: str,
    *,
    priority: float = 0.3,
    why: str = "recent tool output",
    now: datetime | None = None,
) -> list[Change]:
    """Add a tool's output file (kept from its end: logs matter most where they stop)."""
    action = {
        "action": "add_to_working_set",
        "path": path,
        "priority": priority,
        "role": "context",
        "truncate_strategy": "start",
        "why": why,
    }
    return apply_updates(ws, [action], actor="orchestrator", now=now)


def remove_old_tool_outputs(
    ws: Workspace, *, prefix: str = "tool/", keep: int = 3, now: datetime | None = None
) -> list[Change]:
    """Remove tool outputs (paths under ``prefix``) beyond the ``keep`` most recently modified."""
    manifest = _manifest(ws)
    outputs = [f.path for f in manifest.files if f.path.startswith(prefix)]
    newest_first = sorted(outputs, key=lambda p: (-_mtime(ws, p), p))
    old = newest_first[keep:]
    actions = [
        {
            "action": "remove_from_working_set",
            "path": p,
            "why": f"old tool output ({keep} newer {plural(keep, 'one')} kept)",
        }
        for p in old
    ]
    return apply_updates(ws, actions, actor="orchestrator", now=now)


def bump_referenced(
    ws: Workspace,
    paths: Iterable[str],
    *,
    by: float = 0.1,
    ceiling: float = 1.0,
    now: datetime | None = None,
) -> list[Change]:
    """Raise the priority of listed files referenced recently (up to ``ceiling``)."""
    manifest = _manifest(ws)
    wanted = set(paths)
    actions = []
    for f in manifest.files:
        if f.path in wanted and f.priority < ceiling:
            new = min(ceiling, f.priority + by)
            actions.append(
                {
                    "action": "adjust_priority",
                    "path": f.path,
                    "priority": new,
                    "why": "referenced recently",
                }
            )
    return apply_updates(ws, actions, actor="orchestrator", now=now)


def demote_unused(
    ws: Workspace,
    last_used: Mapping[str, int],
    *,
    turn: int,
    after_turns: int,
    by: float = 0.1,
    floor: float = 0.1,
    now: datetime | None = None,
) -> list[Change]:
    """Lower the priority of files not used for ``after_turns`` turns (``last_used`` maps a
    path to the turn it was last used in; a path never used counts from turn 0). Files with
    role ``system`` are left alone."""
    manifest = _manifest(ws)
    actions = []
    for f in manifest.files:
        idle = turn - last_used.get(f.path, 0)
        if f.role != "system" and idle >= after_turns and f.priority > floor:
            actions.append(
                {
                    "action": "adjust_priority",
                    "path": f.path,
                    "priority": max(floor, f.priority - by),
                    "why": f"not used for {idle} {plural(idle, 'turn')}",
                }
            )
    return apply_updates(ws, actions, actor="orchestrator", now=now)

"""Render a snapshot as seed 000's condensed "Nexus Environment" section.

The text depends only on the snapshot's content (sorted, no timestamps), so the system prompt
stays byte-stable while capabilities are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from lamina_nexus.snapshot import Capability, Snapshot

MARKS = {"ready": "✅", "needs_setup": "🔧", "broken": "❌"}
LEGEND = "✅ ready · 🔧 needs setup · ❌ broken"
_WORD = re.compile(r"[\w-]+")


def scope_for_task(
    snapshot: Snapshot, task: str | None, explicit: Collection[str] = ()
) -> set[str]:
    """The capability names a worker's environment shows: ``explicit`` names or categories
    when given, else those whose name or category the task mentions (case-insensitive)."""
    wanted = {w.casefold() for w in explicit}
    if not wanted:
        words = {w.casefold() for w in _WORD.findall(task or "")}
        for cap in snapshot.capabilities:
            for key in (cap.name.casefold(), cap.category.casefold()):
                if key in words:
                    wanted.add(key)
    return {
        c.name
        for c in snapshot.capabilities
        if c.name.casefold() in wanted or c.category.casefold() in wanted
    }


def _category_line(category: str, caps: list[Capability]) -> str:
    chunks = []
    ready = [c.name for c in caps if c.status == "ready"]
    if ready:
        chunks.append(f"{', '.join(ready)} {MARKS['ready']}")
    for cap in caps:
        if cap.status == "ready":
            continue
        label = "needs setup" if cap.status == "needs_setup" else "broken"
        why = f": {cap.reason}" if cap.reason else ""
        chunks.append(f"{cap.name} {MARKS[cap.status]} ({label}{why})")
    return f"{category}: {' | '.join(chunks)}"


def render_environment(
    snapshot: Snapshot,
    *,
    cli: str = "nexus",
    skill_command: str = "nexus skill use <name>",
    scope: set[str] | None = None,
) -> str:
    """The section body: capabilities by category with status, how to load a guide, credential
    counts. ``scope`` limits the capabilities shown (a worker's task)."""
    caps = [c for c in snapshot.capabilities if scope is None or c.name in scope]
    lines = [f"You have the `{cli}` CLI for skill discovery and credential management.", ""]
    heading = "### Capabilities" if scope is None else "### Capabilities (scoped to your task)"
    lines.append(heading)
    if caps:
        by_category: dict[str, list[Capability]] = {}
        for cap in caps:
            by_category.setdefault(cap.category, []).append(cap)
        lines.extend(_category_line(cat, members) for cat, members in by_category.items())
        lines.append(f"({LEGEND})")
    elif scope is not None:
        lines.append(f"None matched your task; run `{cli} status` to see every capability.")
    else:
        lines.append("None reported.")
    lines += ["", "### Using Skills"]
    lines.append(f"Run `{skill_command}` to get the full guide for any capability.")
    creds = snapshot.credentials
    lines += ["", "### Credentials"]
    broken = f"{creds.broken_count} broken"
    if creds.broken:
        broken += f" ({', '.join(creds.broken)})"
    lines.append(f"{creds.configured} configured | {broken}")
    return "\n".join(lines)

"""Render a snapshot as the Broker design's condensed "Nexus Environment" section.

The text depends only on the snapshot's content (sorted, no timestamps), so the system prompt
stays byte-stable while capabilities are unchanged. The section is trusted (it goes into the
system prompt as it is), so every value from the snapshot passes through ``data`` first: it
cannot open a fence, a heading, a quote, a list or a tag.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from fnmatch import fnmatchcase

from lamina_nexus.snapshot import Capability, Snapshot

MARKS = {"ready": "✅", "needs_setup": "🔧", "broken": "❌"}
LEGEND = "✅ ready · 🔧 needs setup · ❌ broken"
_WORD = re.compile(r"[\w-]+")
# Backslashes and backticks are escaped (no code span or fence can open) and a ``<`` that could
# start a tag becomes ``&lt;``; at the start of a line, a character that could start a block
# (heading, quote, list, fence, table, thematic break) or an ordered-list number is escaped.
_INLINE = re.compile(r"[\\`]|<(?=[/!?:_]|[^\W\d])")
_BLOCK_START = re.compile(r"^(?:([#>~=+*_|-])|(\d{1,9})(?=[.)]))")


def data(value: str, *, line_start: bool = False) -> str:
    """A snapshot value (already one line) as it may appear in the trusted section;
    ``line_start`` when it begins a line."""
    value = _INLINE.sub(lambda m: "&lt;" if m.group() == "<" else "\\" + m.group(), value)
    if line_start:
        value = _BLOCK_START.sub(
            lambda m: "\\" + m.group() if m.group(1) else m.group() + "\\", value
        )
    return value


def scope_for_task(
    snapshot: Snapshot, task: str | None, explicit: Collection[str] = ()
) -> set[str]:
    """The capability names a worker's environment shows: those ``explicit`` names (a name,
    a category or a glob such as ``email-*``) when given, else those whose name or category
    the task mentions as a word (case-insensitive)."""
    patterns = {w.casefold() for w in explicit}
    if not patterns:
        patterns = {w.casefold() for w in _WORD.findall(task or "")}
    return {
        c.name
        for c in snapshot.capabilities
        if any(
            fnmatchcase(key, pattern)
            for key in (c.name.casefold(), c.category.casefold())
            for pattern in patterns
        )
    }


def _category_line(category: str, caps: list[Capability]) -> str:
    chunks = []
    ready = [data(c.name) for c in caps if c.status == "ready"]
    if ready:
        chunks.append(f"{', '.join(ready)} {MARKS['ready']}")
    for cap in caps:
        if cap.status == "ready":
            continue
        label = "needs setup" if cap.status == "needs_setup" else "broken"
        why = f": {data(cap.reason)}" if cap.reason else ""
        chunks.append(f"{data(cap.name)} {MARKS[cap.status]} ({label}{why})")
    return f"{data(category, line_start=True)}: {' | '.join(chunks)}"


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
        broken += f" ({', '.join(data(name) for name in creds.broken)})"
    lines.append(f"{creds.configured} configured | {broken}")
    return "\n".join(lines)

"""Working-set updates (the working-set protocol's updates), applied atomically to
``working-set.yml``.

Model-initiated: ``add_to_working_set``, ``remove_from_working_set``, ``adjust_priority``, each
with a ``why`` (the orchestrator's own are in ``orchestrator``). Every change is made under a
lock on the round-trip document (comments, order and quoting preserved), written to a
temporary file and renamed over the manifest, then appended to a JSON-lines change log; every
file is opened beneath the root (``beneath``), never through a symlink that leads out.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from io import StringIO
from typing import Any, Literal

from attrs import frozen

from lamina import ConfigError
from lamina_workspace.beneath import FileRefused, printable
from lamina_workspace.files import read_text
from lamina_workspace.manifest import (
    MAX_MANIFEST_BYTES,
    ROLES,
    STRATEGIES,
    load_document,
    parse_manifest,
    yaml,
)
from lamina_workspace.where import Workspace
from lamina_workspace.writes import append_text, locked, replace_text

Actor = Literal["model", "orchestrator", "user"]
ACTIONS = ("add_to_working_set", "remove_from_working_set", "adjust_priority")
_ACTION_KEYS = {
    "add_to_working_set": {
        "action",
        "path",
        "priority",
        "role",
        "truncate_strategy",
        "max_lines",
        "why",
    },
    "remove_from_working_set": {"action", "path", "why"},
    "adjust_priority": {"action", "path", "priority", "why"},
}


class UpdateError(ConfigError):
    """An update that is malformed or may not be applied (names the action and the field)."""


@frozen(kw_only=True)
class Change:
    """One applied change, as it is written to the log."""

    action: str
    path: str
    why: str
    actor: Actor
    at: str
    priority: float | None = None
    previous_priority: float | None = None

    def record(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "at": self.at,
            "actor": self.actor,
            "action": self.action,
            "path": self.path,
            "why": self.why,
        }
        if self.priority is not None:
            data["priority"] = self.priority
        if self.previous_priority is not None:
            data["previous_priority"] = self.previous_priority
        return data


def _validate_action(raw: Any, index: int, ws: Workspace) -> dict[str, Any]:
    where = f"updates[{index}]"

    def fail(message: str, key: str | None = None) -> UpdateError:
        return UpdateError(message, file=ws.shown, key=f"{where}.{key}" if key else where)

    if not isinstance(raw, Mapping):
        raise fail(f"expected a mapping with action, path and why, got {type(raw).__name__}")
    action = raw.get("action")
    if action not in ACTIONS:
        raise fail(f"expected one of {', '.join(ACTIONS)}, got {action!r}", "action")
    unknown = sorted(set(raw) - _ACTION_KEYS[action])
    if unknown:
        raise fail(f"unknown keys {unknown} for {action}", unknown[0])
    why = raw.get("why")
    if not isinstance(why, str) or not why.strip():
        raise fail("every update needs a non-empty why", "why")
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip():
        raise fail(f"expected a non-empty string, got {path!r}", "path")
    priority = raw.get("priority")
    if action == "adjust_priority" and priority is None:
        raise fail("adjust_priority needs a priority", "priority")
    if priority is not None and (
        isinstance(priority, bool)
        or not isinstance(priority, int | float)
        or not 0.0 <= priority <= 1.0
    ):
        raise fail(f"expected a number within 0.0..1.0, got {priority!r}", "priority")
    if raw.get("role", "context") not in ROLES:
        raise fail(f"expected one of {', '.join(ROLES)}", "role")
    if raw.get("truncate_strategy", "end") not in STRATEGIES:
        raise fail(f"expected one of {', '.join(STRATEGIES)}", "truncate_strategy")
    max_lines = raw.get("max_lines")
    if max_lines is not None and (
        isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines < 1
    ):
        raise fail(f"expected an integer > 0, got {max_lines!r}", "max_lines")
    return dict(raw)


def _find(files: Any, path: str) -> int | None:
    for i, item in enumerate(files):
        if isinstance(item, Mapping) and item.get("path") == path:
            return i
    return None


def _new_entry(action: Mapping[str, Any]) -> Any:
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    entry = CommentedMap()
    entry["path"] = DoubleQuotedScalarString(action["path"])
    entry["priority"] = float(action.get("priority", 0.5))
    entry["role"] = DoubleQuotedScalarString(action.get("role", "context"))
    entry["truncate_strategy"] = DoubleQuotedScalarString(action.get("truncate_strategy", "end"))
    if action.get("max_lines") is not None:
        entry["max_lines"] = action["max_lines"]
    return entry


def _apply_one(doc: Any, action: Mapping[str, Any], ws: Workspace, actor: Actor, at: str) -> Change:
    from ruamel.yaml.comments import CommentedSeq

    kind, path, why = action["action"], action["path"], action["why"].strip()
    change = functools.partial(Change, action=kind, path=path, why=why, actor=actor, at=at)
    files = doc.get("files")
    if files is None:
        files = doc["files"] = CommentedSeq()
    index = _find(files, path)
    if kind == "add_to_working_set":
        if index is not None:
            raise UpdateError(f"{path!r} is already in the working set", file=ws.shown, key="path")
        try:  # refuse now what assembly would refuse later: missing, binary, outside the root
            read_text(ws.root, path, strategy="end", max_bytes=8192)
        except FileRefused as exc:
            raise UpdateError(
                f"cannot add {printable(path)}: {exc.reason}", file=ws.shown, key="path"
            ) from exc
        files.append(_new_entry(action))
        return change(priority=float(action.get("priority", 0.5)))
    if index is None:
        raise UpdateError(f"{path!r} is not in the working set", file=ws.shown, key="path")
    previous = files[index].get("priority", 0.5)
    if kind == "remove_from_working_set":
        del files[index]
        return change(previous_priority=float(previous))
    new = round(float(action["priority"]), 6)
    files[index]["priority"] = new
    return change(priority=new, previous_priority=float(previous))


def apply_updates(
    ws: Workspace,
    actions: Sequence[Mapping[str, Any]],
    *,
    actor: Actor = "model",
    now: datetime | None = None,
) -> list[Change]:
    """Apply ``actions`` all or nothing: every action is checked and the result validated
    against the schema before the manifest is replaced; then the changes are logged."""
    checked = [_validate_action(a, i, ws) for i, a in enumerate(actions)]
    if not checked:
        return []
    at = (now or datetime.now(UTC)).isoformat().replace("+00:00", "Z")
    try:
        with locked(ws.root, f"{ws.manifest}.lock"):
            return _apply_locked(ws, checked, actor, at)
    except FileRefused as exc:
        raise UpdateError(f"{printable(exc.path)}: {exc.reason}", file=ws.shown) from exc


def _apply_locked(
    ws: Workspace, checked: list[dict[str, Any]], actor: Actor, at: str
) -> list[Change]:
    text = read_text(ws.root, ws.manifest, max_bytes=MAX_MANIFEST_BYTES).text
    doc = load_document(text, ws.shown)
    parse_manifest(doc, ws.shown)  # refuse to edit a manifest that is already invalid
    changes = [_apply_one(doc, a, ws, actor, at) for a in checked]
    _touch_metadata(doc, actor, at)
    out = StringIO()
    yaml().dump(doc, out)
    new_text = out.getvalue()
    parse_manifest(load_document(new_text, ws.shown), ws.shown)
    replace_text(ws.root, ws.manifest, new_text)
    lines = [json.dumps(c.record(), ensure_ascii=False, sort_keys=True) + "\n" for c in changes]
    append_text(ws.root, ws.log, "".join(lines))
    return changes


def _touch_metadata(doc: Any, actor: Actor, at: str) -> None:
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    meta = doc.get("metadata")
    if meta is None:
        meta = doc["metadata"] = CommentedMap()
    meta["last_updated"] = DoubleQuotedScalarString(at)
    meta["assembled_by"] = DoubleQuotedScalarString(actor)


def parse_actions(text: str, source: str) -> list[Mapping[str, Any]]:
    """Actions from YAML text: one mapping, a list of them, or several ``---`` documents."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        docs = [d for d in YAML(typ="safe").load_all(text) if d is not None]
    except YAMLError as exc:
        raise UpdateError(f"not valid YAML: {exc}", file=source) from exc
    out: list[Mapping[str, Any]] = []
    for d in docs:
        out.extend(d if isinstance(d, list) else [d])
    return out

"""The orchestrator's working-set updates run from the turn loop (``[plugins.workspace.
orchestrator] enabled``): before each turn is assembled, new tool outputs are added and old
ones aged out, files the event (or a reply the host passed in the request) names are
bumped, files unused for N turns demoted; after it, files the model's latest reply names
(history read by a plugin such as the ledger) are bumped for the next turn.

A turn is identified by its session, parent turn and event (id, time, content): the same
event assembled again (a retry, a compaction pass) does not run the rules twice. What the
rules remember between turns (the turn count, when each file was last used, the tool
outputs already seen) is a small JSON file beneath the root, replaced atomically under a
lock, so concurrent assemblies serialize.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import posixpath
import stat
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from attrs import frozen

from lamina import AssemblyRequest, ConfigError, LaminaError, Message
from lamina_workspace.beneath import Changed, FileRefused, printable, walk
from lamina_workspace.files import read_text
from lamina_workspace.manifest import read_manifest
from lamina_workspace.orchestrator import (
    add_tool_output,
    bump_referenced,
    demote_unused,
    remove_old_tool_outputs,
)
from lamina_workspace.settings import NAME, OrchestratorSettings
from lamina_workspace.tools import mentioned_paths
from lamina_workspace.updates import Change
from lamina_workspace.where import Workspace
from lamina_workspace.writes import append_text, locked, replace_text

#: Most files looked at under the tool-output folder in one turn.
MAX_OUTPUTS = 1000
_MAX_STATE = 4 * 1024 * 1024
_DIR_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


@frozen(kw_only=True)
class TurnUpdates:
    """What the rules did this turn, and what they could not do."""

    changes: tuple[Change, ...] = ()
    warnings: tuple[str, ...] = ()


def turn_key(request: AssemblyRequest) -> str:
    """The identity of the turn ``request`` assembles (same event, same key)."""
    event = request.event
    fields = (
        request.session_label,
        request.parent_turn_id or "",
        event.id or "",
        event.time.isoformat() if event.time else "",
        event.content,
    )
    raw = "\x1f".join(fields).encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()[:32]


def tool_outputs(ws: Workspace, folder: str) -> dict[str, int]:
    """Regular files beneath ``folder`` (relative to the root, symlinks not followed, at most
    ``MAX_OUTPUTS``) and their modification times; none when the folder does not exist."""

    def final(parent: int, name: str) -> dict[str, int]:
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Changed from exc  # a symlink: the walk follows it if it stays inside
            raise FileRefused(folder, f"cannot open the folder: {exc.strerror}") from exc
        try:
            return _scan(fd, folder)
        finally:
            os.close(fd)

    try:
        return walk(ws.root, folder, final)
    except FileRefused as exc:
        if exc.reason == "no such file":
            return {}
        raise


def _scan(fd: int, folder: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for top, dirs, names, dir_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
        dirs.sort()
        for name in sorted(names):
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                found[posixpath.normpath(posixpath.join(folder, top, name))] = st.st_mtime_ns
                if len(found) >= MAX_OUTPUTS:
                    return found
    return found


def _last_reply(history: Iterable[Message]) -> str:
    replies = [m for m in history if m.role == "assistant"]
    return replies[-1].text if replies else ""


class TurnLoop:
    """The rules for one configured workspace."""

    def __init__(self, ws: Workspace, settings: OrchestratorSettings) -> None:
        self.ws, self.settings = ws, settings

    def before(self, request: AssemblyRequest) -> TurnUpdates:
        """Run the rules for the turn ``request`` assembles (nothing when they already ran)."""
        with self._state() as state:
            key = turn_key(request)
            if state.get("key") == key:
                return TurnUpdates()
            turn = int(state.get("turn", 0)) + 1
            state.update(turn=turn, key=key, bumped=[], after=None)
            changes, warnings = self._outputs(state)
            text = request.event.content
            if request.history:
                text += "\n" + _last_reply(request.history)
            changes += self._bump(state, text, turn)
            changes += self._demote(state, turn)
            return TurnUpdates(changes=tuple(changes), warnings=tuple(warnings))

    def after(self, request: AssemblyRequest, history: Iterable[Message]) -> TurnUpdates:
        """Bump what the latest reply in the assembled ``history`` names, when the history
        came from a plugin (a request's own history was read before the turn)."""
        if request.history is not None:
            return TurnUpdates()
        reply = _last_reply(history)
        if not reply:
            return TurnUpdates()
        with self._state() as state:
            key = turn_key(request)
            if state.get("key") != key or state.get("after") == key:
                return TurnUpdates()
            state["after"] = key
            return TurnUpdates(changes=tuple(self._bump(state, reply, int(state["turn"]))))

    # -- the rules -----------------------------------------------------------------------

    def _outputs(self, state: dict[str, Any]) -> tuple[list[Change], list[str]]:
        s, ws = self.settings, self.ws
        if not s.tool_outputs:
            return [], []
        folder = s.tool_outputs.strip("/")
        try:
            found = tool_outputs(ws, folder)
        except FileRefused as exc:
            return [], [f"tool outputs {printable(folder)}: {exc.reason}"]
        listed = {f.path for f in read_manifest(ws.root, ws.manifest).files}
        seen: dict[str, int] = state.get("outputs", {})
        changes: list[Change] = []
        warnings: list[str] = []
        for path, mtime in found.items():
            if path in listed or seen.get(path) == mtime:
                continue  # listed, or seen unchanged (the model may have removed it)
            try:
                changes += add_tool_output(
                    ws, path, priority=s.tool_output_priority, why="new tool output"
                )
            except LaminaError as exc:
                warnings.append(f"tool output {printable(path)} not added: {exc}")
        state["outputs"] = found
        changes += remove_old_tool_outputs(ws, prefix=f"{folder}/", keep=s.keep_tool_outputs)
        return changes, warnings

    def _bump(self, state: dict[str, Any], text: str, turn: int) -> list[Change]:
        manifest = read_manifest(self.ws.root, self.ws.manifest)
        named = mentioned_paths(manifest, text)
        last_used: dict[str, int] = state.setdefault("last_used", {})
        for path in named:
            last_used[path] = turn
        bumped: list[str] = state.setdefault("bumped", [])
        fresh = [p for p in named if p not in bumped]
        bumped.extend(fresh)
        s = self.settings
        return bump_referenced(self.ws, fresh, by=s.bump_by, ceiling=s.bump_ceiling)

    def _demote(self, state: dict[str, Any], turn: int) -> list[Change]:
        s = self.settings
        manifest = read_manifest(self.ws.root, self.ws.manifest)
        last_used: dict[str, int] = state.setdefault("last_used", {})
        listed = {f.path for f in manifest.files}
        for path in list(last_used):
            if path not in listed:
                del last_used[path]
        for path in listed:
            last_used.setdefault(path, turn)  # counted from the turn it was first seen
        if not s.demote_after_turns:
            return []
        demoted = demote_unused(
            self.ws,
            last_used,
            turn=turn,
            after_turns=s.demote_after_turns,
            by=s.demote_by,
            floor=s.demote_floor,
        )
        for change in demoted:
            last_used[change.path] = turn  # the next step down after as many idle turns again
        return demoted

    # -- state ---------------------------------------------------------------------------

    @contextmanager
    def _state(self) -> Iterator[dict[str, Any]]:
        """The rules' memory, read under the state lock and written back (atomically) when
        the body succeeds; a missing or unreadable file starts the count again."""
        root, path = self.ws.root, self.settings.state
        with ExitStack() as stack:
            try:
                append_text(root, f"{path}.lock", "")  # the lock file and its folders
                stack.enter_context(locked(root, f"{path}.lock"))
            except FileRefused as exc:
                raise _state_error(exc) from exc
            try:
                loaded = json.loads(read_text(root, path, max_bytes=_MAX_STATE).text)
            except (FileRefused, ValueError):
                loaded = {}
            data: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
            yield data
            text = json.dumps(data, ensure_ascii=False, sort_keys=True) + "\n"
            try:
                replace_text(root, path, text)
            except FileRefused as exc:
                raise _state_error(exc) from exc


def _state_error(exc: FileRefused) -> ConfigError:
    return ConfigError(
        f"{printable(exc.path)}: {exc.reason}", key=f"plugins.{NAME}.orchestrator.state"
    )

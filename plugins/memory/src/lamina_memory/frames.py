"""Stack-based task frames of the memory framework design: push a sub-goal, pop it with its result, and the context
they give the current frame: the root goal, the path's summaries and the finished siblings."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from typing import Any

from attrs import asdict, define, field

#: A frame's statuses: working on it, finished (with a result), or waiting on something.
STATUSES = ("active", "complete", "blocked")
#: Shares of the memory budget (memory framework design): root goal ~5 %, path ~15 %, sibling results ~10 %.
ROOT_SHARE, PATH_SHARE, SIBLING_SHARE = 0.05, 0.15, 0.10


@define
class TaskFrame:
    """One goal on the stack; ``result`` is set when it is popped."""

    id: str
    goal: str
    parent: str | None = None
    depth: int = 0
    status: str = "active"
    result: str | None = None
    children: list[str] = field(factory=list)


class TaskStack:
    """A task tree walked as a stack: ``push`` a sub-goal, ``pop`` it with its result, ``block``
    the current one while it waits. ``on_change`` (the service's) persists every change."""

    def __init__(self, on_change: Callable[[str], None] | None = None) -> None:
        self.frames: dict[str, TaskFrame] = {}
        self._stack: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.on_change = on_change

    # -- persistence ----------------------------------------------------------------------

    def dumps(self) -> str:
        """The whole stack as JSON (frames, the stack's order, the next id)."""
        data = {
            "frames": [asdict(f) for f in self.frames.values()],
            "stack": self._stack,
            "next": len(self.frames) + 1,
        }
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def loads(cls, text: str, on_change: Callable[[str], None] | None = None) -> TaskStack:
        """A stack from ``dumps``'s JSON."""
        data: dict[str, Any] = json.loads(text)
        out = cls(on_change)
        for raw in data["frames"]:
            frame = TaskFrame(**raw)
            out.frames[frame.id] = frame
        out._stack = [str(i) for i in data["stack"]]
        out._ids = itertools.count(int(data["next"]))
        return out

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.dumps())

    def block(self, reason: str | None = None) -> TaskFrame:
        """Mark the current frame blocked (waiting on something; ``reason`` says on what)."""
        with self._lock:
            if not self._stack:
                raise IndexError("block on an empty task stack")
            frame = self.frames[self._stack[-1]]
            frame.status, frame.result = "blocked", reason
            self._changed()
            return frame

    def unblock(self) -> TaskFrame:
        """Make the current, blocked frame active again."""
        with self._lock:
            if not self._stack:
                raise IndexError("unblock on an empty task stack")
            frame = self.frames[self._stack[-1]]
            frame.status, frame.result = "active", None
            self._changed()
            return frame

    def by_status(self, status: str) -> list[TaskFrame]:
        """Every frame with ``status`` (``active``, ``complete``, ``blocked``)."""
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; known: {', '.join(STATUSES)}")
        return [f for f in self.frames.values() if f.status == status]

    def push(self, goal: str) -> TaskFrame:
        with self._lock:
            parent = self._stack[-1] if self._stack else None
            frame = TaskFrame(
                id=f"t{next(self._ids)}", goal=goal, parent=parent, depth=len(self._stack)
            )
            self.frames[frame.id] = frame
            if parent is not None:
                self.frames[parent].children.append(frame.id)
            self._stack.append(frame.id)
            self._changed()
            return frame

    def pop(self, result: str) -> str:
        """Finish the current frame with ``result`` (what its parent and siblings will see)."""
        with self._lock:
            if not self._stack:
                raise IndexError("pop from an empty task stack")
            frame = self.frames[self._stack.pop()]
            frame.status, frame.result = "complete", result
            self._changed()
            return result

    def peek(self) -> TaskFrame | None:
        return self.frames[self._stack[-1]] if self._stack else None

    def path(self) -> list[TaskFrame]:
        """Root to current."""
        return [self.frames[i] for i in self._stack]

    def siblings(self) -> list[TaskFrame]:
        """Finished frames that share the current frame's parent."""
        current = self.peek()
        if current is None:
            return []
        return [
            f
            for f in self.frames.values()
            if f.parent == current.parent and f.status == "complete" and f.id != current.id
        ]

    def context_lines(self) -> list[tuple[str, float]]:
        """(line, share of the memory budget) for the root, each ancestor and each sibling."""
        path = self.path()
        if not path:
            return []
        lines = [(f"Root goal: {path[0].goal}", ROOT_SHARE)]
        middle = path[1:-1]
        for f in middle:
            lines.append((f"Parent task: {f.goal}", PATH_SHARE / len(middle)))
        if len(path) > 1 or path[-1].status == "blocked":
            current = path[-1]
            state = (
                f" (blocked: {current.result or 'waiting'})" if current.status == "blocked" else ""
            )
            lines.append(
                (f"Current task: {current.goal}{state}", PATH_SHARE if not middle else 0.0)
            )
        sibs = self.siblings()
        for f in sibs:
            lines.append((f"Done alongside: {f.goal} → {f.result}", SIBLING_SHARE / len(sibs)))
        return lines

"""One lock per session label, kept only while someone holds or waits for it.

A long-running host sees many session labels; a lock made for each and never dropped would
grow with every label ever assembled. A label's lock exists while a call holds it or waits
for it, and is dropped when the last of them is done (a later call makes a new one)."""

from __future__ import annotations

import threading

from attrs import define, field


@define(kw_only=True, eq=False)
class _Entry:
    lock: threading.Lock = field(factory=threading.Lock)
    users: int = 0  # calls holding or waiting for ``lock``


class SessionLocks:
    """``with locks.hold(label):`` one session's assemblies and compactions take turns; other
    labels' run side by side. Not re-entrant (a thread holding a label must not ask again)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._guard = threading.Lock()

    def __len__(self) -> int:
        """How many labels have a lock now (held or waited for)."""
        with self._guard:
            return len(self._entries)

    def hold(self, label: str) -> _Hold:
        return _Hold(self, label)


class _Hold:
    """One ``SessionLocks.hold``: waits for the label's lock on entry, releases it (and drops
    the lock when nobody else wants it) on exit. A plain class: a generator-based context
    manager costs several times as much, and one runs per request."""

    __slots__ = ("_entry", "_label", "_locks")

    def __init__(self, locks: SessionLocks, label: str) -> None:
        self._locks, self._label = locks, label
        self._entry: _Entry | None = None

    def __enter__(self) -> None:
        locks, label = self._locks, self._label
        with locks._guard:
            entry = locks._entries.get(label)
            if entry is None:
                entry = locks._entries[label] = _Entry()
            entry.users += 1
        try:
            entry.lock.acquire()
        except BaseException:
            self._leave(entry)
            raise
        self._entry = entry

    def __exit__(self, *_: object) -> None:
        entry = self._entry
        assert entry is not None
        self._entry = None
        entry.lock.release()
        self._leave(entry)

    def _leave(self, entry: _Entry) -> None:
        locks = self._locks
        with locks._guard:
            entry.users -= 1
            if entry.users == 0:
                del locks._entries[self._label]

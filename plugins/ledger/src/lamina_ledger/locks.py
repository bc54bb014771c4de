"""One lock per session label, kept only while someone holds or waits for it.

A long-running host sees many session labels; a lock made for each and never dropped would
grow with every label ever assembled. A label's lock exists while a call holds it or waits
for it, and is dropped when the last of them is done (a later call makes a new one)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

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

    @contextmanager
    def hold(self, label: str) -> Iterator[None]:
        with self._guard:
            entry = self._entries.get(label)
            if entry is None:
                entry = self._entries[label] = _Entry()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._guard:
                entry.users -= 1
                if entry.users == 0:
                    del self._entries[label]

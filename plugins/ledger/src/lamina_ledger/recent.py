"""A bounded memory of the most recent sessions.

A long-running host sees many session labels: what a ``LedgerSession`` remembers per label
(the last request assembled, what it showed of the budget, the history's last total) is kept
for the ``SESSIONS`` labels used most recently; the least recently used is forgotten first. A
label forgotten and used again only costs what its first request cost (the kernel is asked
whether the history fits, its size is summed once more)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")

#: Entries each of a ``LedgerSession``'s per-session memories keeps.
SESSIONS = 1024


class Recent(Generic[K, V]):
    """A mapping of at most ``size`` entries, least recently used forgotten first (reading or
    writing an entry makes it the most recent). Safe to share between threads."""

    def __init__(self, size: int = SESSIONS) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def __setitem__(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Forget ``key``'s entry; returns it (``None`` when there was none)."""
        with self._lock:
            return self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

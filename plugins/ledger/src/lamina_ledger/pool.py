"""Ledgers kept open between requests, by database, so each request's history provider reads
only what changed (a reader remembers each session's decoded history).

A ``LedgerSession`` lends its own ledger for its database while it is open: the provider then
reads through it, and the session and its assemblies share one connection and one memory.
Otherwise the pool opens a read-only ledger per database and keeps the few most recent, and
closes them when the interpreter exits (a PostgreSQL connection left to the garbage collector
warns that it was never closed)."""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict

from lamina_ledger.ledger import Ledger

#: Read-only ledgers the pool keeps open (the least recently used is closed first).
SIZE = 8


class LedgerPool:
    """Open ledgers by target; safe to share between threads."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._readers: OrderedDict[str, Ledger] = OrderedDict()
        self._lent: dict[str, list[Ledger]] = {}
        self._closes_at_exit = False

    def get(self, target: str, *, busy_timeout: float, connect_timeout: float) -> Ledger:
        """A lent ledger for ``target``, else the pool's reader (opened on first use)."""
        with self._lock:
            lent = self._lent.get(target)
            if lent:
                return lent[-1]
            found = self._readers.get(target)
            if found is not None:
                self._readers.move_to_end(target)
                return found
            opened = Ledger.open(
                target, readonly=True, busy_timeout=busy_timeout, connect_timeout=connect_timeout
            )
            self._readers[target] = opened
            if not self._closes_at_exit:  # (registered with the first reader it opens)
                atexit.register(self.clear)
                self._closes_at_exit = True
            while len(self._readers) > self.size:
                self._readers.popitem(last=False)[1].close()
            return opened

    def lend(self, target: str, ledger: Ledger) -> None:
        """Read ``target`` through ``ledger`` until it is withdrawn."""
        with self._lock:
            self._lent.setdefault(target, []).append(ledger)

    def withdraw(self, target: str, ledger: Ledger) -> None:
        with self._lock:
            lent = self._lent.get(target, [])
            if ledger in lent:
                lent.remove(ledger)
            if not lent:
                self._lent.pop(target, None)

    def discard(self, target: str, ledger: Ledger) -> None:
        """Forget a reader whose connection failed (the next request opens a new one)."""
        with self._lock:
            if self._readers.get(target) is ledger:
                del self._readers[target]
                ledger.close()

    def clear(self) -> None:
        """Close every reader the pool opened."""
        with self._lock:
            for reader in self._readers.values():
                reader.close()
            self._readers.clear()


#: The process's pool (the history provider and ``LedgerSession`` use it).
POOL = LedgerPool()

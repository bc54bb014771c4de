"""A session's history read on the assembling thread and handed to the ledger's history
provider from memory, so the kernel's call to it needs no hop to its thread pool.

Just before it runs the kernel, ``LedgerSession`` reads the session's history on its own
thread (the session's version and head checked: one query when nothing changed), as it
reads it for its own sums. While the kernel runs, the provider's ``from_memory`` gives that
history's blocks when it is asked on the same thread, for the same database, session and
turn. Anywhere else (a plain ``Assembler.assemble``, another thread or database, a read that
failed, the ledger busy on another thread) it answers ``None`` and the provider reads on the
kernel's pool as always, within its time limit."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from attrs import frozen

from lamina import Block
from lamina_ledger.cache import Entry, cached_blocks
from lamina_ledger.errors import LedgerError
from lamina_ledger.records import History, Turn

if TYPE_CHECKING:
    from lamina_ledger.ledger import Ledger

_local = threading.local()


@frozen(kw_only=True)
class Vouch:
    """What the running thread vouched for: the history of ``key`` (session, turn) read
    through ``ledger`` for ``target``, after its ``writes`` th write transaction."""

    target: str
    ledger: Any
    key: tuple[str, str | None]
    entry: Entry
    writes: int

    def holds(self, target: str, ledger: Any, key: tuple[str, str | None]) -> bool:
        """Whether this is the history of ``key`` for ``target`` through ``ledger``, with
        nothing written through it since."""
        return (
            self.target == target
            and self.ledger is ledger
            and self.key == key
            and self.writes == ledger.db.writes
        )


def _current() -> Vouch | None:
    found: Vouch | None = getattr(_local, "vouch", None)
    return found


class vouched:  # (named as the function it replaced: ``with vouched(...):``)
    """Within: the history of ``session`` (at ``at_turn``) as read now through ``ledger`` is
    what the provider for ``target`` gives on this thread, and what ``history_of`` gives. An
    enclosing ``vouched`` for the same history, with nothing written through the ledger
    since, is not read again. (A plain class: one or two run on every request.)"""

    __slots__ = ("_at_turn", "_before", "_ledger", "_session", "_target")

    def __init__(self, target: str, ledger: Ledger, session: str, at_turn: str | None) -> None:
        self._target, self._ledger, self._session, self._at_turn = target, ledger, session, at_turn
        self._before: Vouch | None = None

    def __enter__(self) -> None:
        ledger, key = self._ledger, (self._session, self._at_turn)
        before = self._before = _current()
        if before is not None and before.holds(self._target, ledger, key):
            return
        vouch: Vouch | None = None
        writes = ledger.db.writes
        try:
            history = ledger.history(self._session, at_turn=self._at_turn)
        except LedgerError:  # (no such session, the database failed): the provider will say
            history = None
        if history is not None:
            with ledger.db.lock:  # (the reader's cache is used under its lock)
                entry = ledger.cache.get(key)
            if entry is not None and entry.history is history:  # (not read inside a write)
                vouch = Vouch(
                    target=self._target, ledger=ledger, key=key, entry=entry, writes=writes
                )
        _local.vouch = vouch

    def __exit__(self, *_: object) -> None:
        _local.vouch = self._before


def history_of(target: str, ledger: Ledger, session: str, at_turn: str | None) -> History:
    """The history this thread vouched for, when it is this one and still holds; else read."""
    found = _current()
    if found is not None and found.holds(target, ledger, (session, at_turn)):
        return found.entry.history
    return ledger.history(session, at_turn=at_turn)


def remembered(
    target: str,
    session: str,
    at_turn: str | None,
    *,
    plugin: str,
    summary: tuple[str, Callable[[History], Block | None]],
    make: Callable[[Turn], Sequence[Block]],
) -> Sequence[Block] | None:
    """The blocks of the history this thread vouched for, when it is this one; else
    ``None``. Never waits: a ledger in use by another thread also gives ``None``."""
    found = _current()
    if found is None or found.target != target or found.key != (session, at_turn):
        return None
    ledger, entry = found.ledger, found.entry
    if not ledger.db.lock.acquire(blocking=False):
        return None
    try:
        return cached_blocks(entry, plugin, (summary[0], lambda: summary[1](entry.history)), make)
    finally:
        ledger.db.lock.release()

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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lamina import Block
from lamina_ledger.cache import Entry, cached_blocks
from lamina_ledger.errors import LedgerError
from lamina_ledger.records import History, Turn

if TYPE_CHECKING:
    from lamina_ledger.ledger import Ledger

_local = threading.local()

#: What the running thread vouched for: (target, ledger, (session, turn), entry).
Vouch = tuple[str, Any, tuple[str, str | None], Entry]


@contextmanager
def vouched(target: str, ledger: Ledger, session: str, at_turn: str | None) -> Iterator[None]:
    """Within: the history of ``session`` (at ``at_turn``) as read now through ``ledger`` is
    what the provider for ``target`` gives on this thread."""
    vouch: Vouch | None = None
    try:
        history = ledger.history(session, at_turn=at_turn)
    except LedgerError:  # (no such session, the database failed): the provider will say
        history = None
    if history is not None:
        with ledger.db.lock:  # (the reader's cache is used under its lock)
            entry = ledger.cache.get((session, at_turn))
        if entry is not None and entry.history is history:  # (not read inside a write)
            vouch = (target, ledger, (session, at_turn), entry)
    before = getattr(_local, "vouch", None)
    _local.vouch = vouch
    try:
        yield
    finally:
        _local.vouch = before


def remembered(
    target: str,
    session: str,
    at_turn: str | None,
    *,
    plugin: str,
    summary: tuple[str, Callable[[History], Block | None]],
    make: Callable[[Turn], Sequence[Block]],
) -> list[Block] | None:
    """The blocks of the history this thread vouched for, when it is this one; else
    ``None``. Never waits: a ledger in use by another thread also gives ``None``."""
    found: Vouch | None = getattr(_local, "vouch", None)
    if found is None or found[0] != target or found[2] != (session, at_turn):
        return None
    ledger, entry = found[1], found[3]
    if not ledger.db.lock.acquire(blocking=False):
        return None
    try:
        return cached_blocks(entry, plugin, (summary[0], lambda: summary[1](entry.history)), make)
    finally:
        ledger.db.lock.release()

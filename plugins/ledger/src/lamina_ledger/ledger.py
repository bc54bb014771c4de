"""The Agents Ledger: the writer hosts append turns and compactions through, and the reader
assembly walks a thread's ancestry with (``reader.py`` and ``writer.py`` hold the two halves).
Every method runs in one transaction; reads see a snapshot, writes are all or nothing, and
every failure names the session, the turn and why."""

from __future__ import annotations

from lamina_ledger.reader import MAX_DEPTH, LedgerReader
from lamina_ledger.writer import LedgerWriter, new_id

__all__ = ["MAX_DEPTH", "Ledger", "LedgerReader", "LedgerWriter", "new_id"]


class Ledger(LedgerWriter):
    """A ledger database opened for reading (``readonly``) or for reading and writing.

    ``target`` is an SQLite file path (created and migrated on first write) or a
    ``postgresql://`` URL. A reader never modifies the database; writers of one session take
    turns, so no acknowledged turn is ever taken off its ancestry.
    """

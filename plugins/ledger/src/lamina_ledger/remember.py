"""How a reader keeps each session's history up to date between requests (see ``cache``): a
history that has not moved is checked with one statement, one that grew is read onto, and
anything else is read whole in a snapshot, reusing the turns decoded already."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from lamina import Chunked
from lamina_ledger.cache import Entry, HistoryCache, appended
from lamina_ledger.db import Database, db_errors
from lamina_ledger.records import History, Turn
from lamina_ledger.rows import TURN_COLUMNS, decode_turn, unanswered

#: Most turns appended since a remembered history that are read onto it; beyond (or when the
#: remembered head is no longer an ancestor) the history is read whole, reusing decoded turns.
_EXTEND = 512


class Remembering:
    """The part of ``LedgerReader`` that brings a remembered history up to date."""

    db: Database
    cache: HistoryCache
    decoded: int

    if TYPE_CHECKING:  # (LedgerReader's)

        def _version_head(self, session: str) -> tuple[int | None, str | None]: ...

        def _read(self, session: str, head: str | None, known: Mapping[str, Turn]) -> History: ...

        def _walk(
            self, session: str, start: str, mode: str, stop: str | None = None, limit: int = ...
        ) -> list[tuple[str, str | None, str]]: ...

        def _turns(
            self, ids: Sequence[str], session: str | None, known: Mapping[str, Turn] | None = None
        ) -> list[Turn]: ...

        def _pair_tool_results(
            self, session: str, turns: list[Turn], known: Mapping[str, Turn] | None = None
        ) -> list[Turn]: ...

    def _entry(self, session: str, at_turn: str | None) -> Entry:
        """The remembered history of ``session`` (at ``at_turn``), brought up to date. Inside
        a write nothing is remembered: what it read could still be rolled back."""
        if self.db.depth:
            version, head = self._version_head(session) if at_turn is None else (None, at_turn)
            return Entry(version=version, head=head, history=self._read(session, head, {}))
        key = (session, at_turn)
        old = self.cache.get(key)
        if at_turn is not None:  # a turn's ancestry never changes
            if old is None:
                history = self._read(session, at_turn, self.cache.known(session))
                old = Entry(version=None, head=at_turn, history=history)
                self.cache.put(key, old)
            return old
        version, head = self._version_head(session)
        if old is not None and old.version == version and old.head == head:
            return old
        extended = self._extended(session, old, head) if old is not None else None
        history = extended or self._read(session, head, self.cache.known(session))
        entry = Entry(version=version, head=head, history=history)
        if old is not None:
            grown = old.history.turns == history.turns[: len(old.history.turns)]
            if extended is not None and grown:
                old.hand_over(entry)  # the old history is a prefix: its block list grows
            else:
                entry.blocks = old.carried(history)
        self.cache.put(key, entry)
        return entry

    def _unchanged(self, session: str, at_turn: str | None) -> Entry | None:
        """The remembered history when it is known still to be the session's without a
        transaction: a pinned turn's, or the head's when nothing was committed since it was
        last confirmed (``lamina_ledger.watch``), else when one statement reads the same
        version and head. ``None``: read in a snapshot."""
        with self.db.lock:
            if self.db.depth:
                return None
            old = self.cache.get((session, at_turn))
            if old is None or at_turn is not None:
                return old
            return old if self._confirmed(session, old) else None

    def _confirmed(self, session: str, entry: Entry) -> bool:
        """Whether ``entry`` has the session's version and head now: nothing committed since
        its mark, or one statement reads them (its mark then taken anew, before it)."""
        watch = self.db.watch
        if watch is not None and watch.holds(entry.mark):
            return True
        mark = watch.mark() if watch is not None else None
        version, head = self._version_head(session)
        if version is None or (version, head) != (entry.version, entry.head):
            return False
        entry.mark = mark
        return True

    def _extended(self, session: str, old: Entry, head: str | None) -> History | None:
        """``old`` 's history with the turns appended on top of it since, or ``None`` when it
        cannot be extended (a compaction since, another branch, too many new turns)."""
        if head is None or old.head is None:
            return None
        walked = self._walk(session, head, "until", old.head, limit=_EXTEND)
        if walked[-1][0] != old.head or any(r[2] != "normal" for r in walked[:-1]):
            return None
        new = self._turns([r[0] for r in reversed(walked[:-1])], session)
        turns: Sequence[Turn] = Chunked.of(old.history.turns).grown(new)  # (shares the old)
        missing = unanswered(m for t in new for m in t.messages)
        if missing and not missing.keys() <= old.calls():  # (the old history is paired)
            turns = tuple(self._pair_tool_results(session, list(turns)))
        return History(
            session=session,
            head_turn_id=head,
            compaction=old.history.compaction,
            turns=turns,
        )

    def _written(self, turn_id: str, session: str) -> tuple[tuple[Any, ...], int] | None:
        """Inside the write that appended ``turn_id``: its row as a reader reads it, and the
        session's version (``None`` before schema 3, which has no versions)."""
        if self.db.schema_version < 3:
            return None
        row = self.db.one(
            f"SELECT {TURN_COLUMNS}, (SELECT version FROM sessions WHERE label = ?) "
            "FROM turns WHERE id = ?",
            (session, turn_id),
        )
        if row is None or row[-1] is None:
            return None
        return tuple(row[:-1]), int(row[-1])

    def _remember_appended(
        self,
        session: str,
        parent: str,
        written: tuple[tuple[Any, ...], int],
        rows: list[tuple[Any, ...]],
    ) -> None:
        """Once the write that appended a turn on ``parent`` committed (``written``: what
        ``_written`` read in it; ``rows``: its messages' rows): the turn goes on the session's
        remembered history, when that is the history it went on (``cache.appended``)."""
        with self.db.lock:
            turn = decode_turn(written[0], rows, session)
            if appended(self.cache, session, parent, written[1], turn):
                self.decoded += 1
                # Confirmed now, while the write's pages are warm: the next request then
                # reads nothing when no one else committed meanwhile.
                entry = self.cache.get((session, None))
                if entry is not None and self.db.watch is not None:
                    with suppress(*db_errors()):  # (the turn is written: the next read checks)
                        self._confirmed(session, entry)

"""The ledger's reading half: sessions, heads, histories (the latest compaction's summary, then
the kept turns), ancestries and statistics, each read in one snapshot transaction."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from lamina import Block, ToolCallPart
from lamina_ledger.cache import HistoryCache, cached_blocks
from lamina_ledger.db import Database, db_errors, explain
from lamina_ledger.errors import LedgerError
from lamina_ledger.records import Compaction, History, Stats, Turn
from lamina_ledger.remember import Remembering
from lamina_ledger.rows import ROLES, TURN_COLUMNS, chunks, decode_turn, unanswered

__all__ = ["MAX_DEPTH", "ROLES", "TURN_COLUMNS", "LedgerReader", "unanswered"]

#: How far an ancestry walk may go before the ledger is taken to be looping.
MAX_DEPTH = 10_000_000
#: Turns read per step when looking further back for the call of a tool result.
_STEP = 15


class LedgerReader(Remembering):
    """A ledger database opened for reading (``readonly``) or for reading and writing.

    ``target`` is an SQLite file path (created and migrated on first write) or a
    ``postgresql://`` URL. A reader never modifies the database.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        #: Each session's last history and its blocks, kept between requests.
        self.cache = HistoryCache()
        #: Turns decoded from rows so far (what the cache saves shows here).
        self.decoded = 0

    @classmethod
    def open(
        cls,
        target: str,
        *,
        readonly: bool = False,
        busy_timeout: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> Self:
        return cls(
            Database.open(
                target,
                readonly=readonly,
                busy_timeout=busy_timeout,
                connect_timeout=connect_timeout,
            )
        )

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return self.db.name

    def _failing(self, session: str | None, turn: str | None = None) -> _Failing:
        """Within: driver errors become ``LedgerError`` s naming the session and turn."""
        return _Failing(self.name, session, turn)

    # -- reading -------------------------------------------------------------------------

    def sessions(self) -> list[str]:
        """Every session label, sorted."""
        with self._failing(None), self.db.read():
            return sorted(r[0] for r in self.db.rows("SELECT label FROM sessions"))

    def head(self, session: str) -> str | None:
        """The session's newest turn id (``None`` for a session with no turns yet)."""
        with self._failing(session), self.db.read():
            return self._head(session)

    def history(self, session: str, *, at_turn: str | None = None) -> History:
        """The session's history up to its head (or ``at_turn``): the latest compaction's
        summary, then the turns it kept and every turn since, tool calls paired with results.

        The history is remembered: the next call reads only what was appended since (one
        query when nothing was), and re-reads the rest only after a compaction or a branch."""
        with self._failing(session, at_turn):
            same = self._unchanged(session, at_turn)
            if same is not None:
                return same.history
            with self.db.read():
                return self._entry(session, at_turn).history

    def history_blocks(
        self,
        session: str,
        *,
        at_turn: str | None,
        plugin: str,
        summary: tuple[str, Callable[[History], Block | None]],
        make: Callable[[Turn], Sequence[Block]],
    ) -> Sequence[Block]:
        """The history's blocks: each turn's ``make(turn)`` made once and remembered with the
        history; ``summary`` is the summary block's maker and the settings it depends on."""
        with self._failing(session, at_turn), self.db.read():
            entry = self._entry(session, at_turn)
            return cached_blocks(
                entry, plugin, (summary[0], lambda: summary[1](entry.history)), make
            )

    def version(self, session: str) -> int | None:
        """The session's version: it moves with every append and compaction (``None`` on a
        ledger older than schema version 3)."""
        with self._failing(session), self.db.read():
            return self._version_head(session)[0]

    def turn(self, turn_id: str, *, session: str | None = None) -> Turn:
        """One turn with its messages."""
        with self._failing(session, turn_id), self.db.read():
            found = self._turns([turn_id], session)
            if not found:
                raise LedgerError("no such turn", session=session, turn=turn_id)
            return found[0]

    def ancestry(self, session: str) -> list[str]:
        """Every turn id of the session's thread, root first (forks share their ancestors)."""
        with self._failing(session), self.db.read():
            head = self._head(session)
            if head is None:
                return []
            return [r[0] for r in reversed(self._walk(session, head, "all"))]

    def known_turns(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are turns in the ledger (in any session)."""
        with self._failing(None), self.db.read():
            found: set[str] = set()
            for chunk in chunks(list(ids), 500):
                marks = ", ".join("?" * len(chunk))
                found.update(
                    r[0] for r in self.db.rows(f"SELECT id FROM turns WHERE id IN ({marks})", chunk)
                )
            return found

    def compaction(self, turn_id: str, *, session: str | None = None) -> Compaction:
        with self._failing(session, turn_id), self.db.read():
            return self._compaction(turn_id, session)

    def stats(self, session: str) -> Stats:
        """Turns, compactions, provider-reported tokens, cost and cache busts over the
        session's ancestry (``lamina_ledger.stats`` has them turn by turn)."""
        from lamina_ledger.stats import turn_report

        return turn_report(self, session).totals

    # -- internals -----------------------------------------------------------------------

    def _read(self, session: str, head: str | None, known: Mapping[str, Turn]) -> History:
        if head is None:
            return History(session=session, head_turn_id=None, compaction=None, turns=())
        return self._history(session, head, known)

    def _version_head(self, session: str) -> tuple[int | None, str | None]:
        version = "s.version" if self.db.schema_version >= 3 else "NULL"
        row = self.db.one(
            f"SELECT {version}, t.head_turn_id FROM sessions s "
            "JOIN threads t ON t.id = s.thread_id WHERE s.label = ?",
            (session,),
        )
        if row is None:
            raise LedgerError("no such session", session=session)
        return (None if row[0] is None else int(row[0])), row[1]

    def _head(self, session: str) -> str | None:
        row = self.db.one(
            "SELECT t.head_turn_id FROM sessions s JOIN threads t ON t.id = s.thread_id "
            "WHERE s.label = ?",
            (session,),
        )
        if row is None:
            raise LedgerError("no such session", session=session)
        head: str | None = row[0]
        return head

    def _walk(
        self, session: str, start: str, mode: str, stop: str | None = None, limit: int = MAX_DEPTH
    ) -> list[tuple[str, str | None, str]]:
        """Turns from ``start`` back through their parents, newest first. ``mode``: ``all``
        (to the root), ``compaction`` (stop at the first compaction turn, included), ``until``
        (stop at ``stop``, included). Raises when a parent link leads nowhere."""
        cond = {"all": "1 = 1", "compaction": "walk.type = 'normal'", "until": "walk.id <> ?"}[mode]
        params: list[Any] = [start, *([stop] if mode == "until" else []), limit]
        rows = self.db.rows(
            "WITH RECURSIVE walk(id, parent_id, type, n) AS ("
            " SELECT id, parent_id, type, 0 FROM turns WHERE id = ?"
            " UNION ALL"
            " SELECT t.id, t.parent_id, t.type, walk.n + 1 FROM walk"
            " JOIN turns t ON t.id = walk.parent_id"
            f" WHERE {cond} AND walk.n < ?"
            ") SELECT id, parent_id, type, n FROM walk ORDER BY n",
            params,
        )
        if not rows:
            raise LedgerError(
                "broken ancestry: the turn does not exist", session=session, turn=start
            )
        last_id, last_parent, last_type, depth = rows[-1]
        if depth >= limit:
            if limit == MAX_DEPTH:
                raise LedgerError(
                    f"broken ancestry: more than {MAX_DEPTH} ancestors (a parent loop?)",
                    session=session,
                    turn=last_id,
                )
            return [r[:3] for r in rows]
        ended = (
            (mode == "compaction" and last_type == "compaction")
            or (mode == "until" and last_id == stop)
            or last_parent is None
        )
        if not ended:
            raise LedgerError(
                f"broken ancestry: its parent turn {last_parent!r} does not exist",
                session=session,
                turn=last_id,
            )
        return [r[:3] for r in rows]

    def _history(self, session: str, head: str, known: Mapping[str, Turn]) -> History:
        since = self._walk(session, head, "compaction")
        compaction: Compaction | None = None
        kept_ids = [r[0] for r in since if r[2] == "normal"]
        if since[-1][2] == "compaction":
            compaction = self._compaction(since[-1][0], session)
            parent = since[-1][1]
            first = compaction.first_kept_turn_id
            if first is not None:
                if parent is None:
                    raise LedgerError(
                        f"compaction's first kept turn {first!r} is not in its ancestry",
                        session=session,
                        turn=compaction.turn_id,
                    )
                try:
                    before = self._walk(session, parent, "until", first)
                except LedgerError as exc:
                    raise LedgerError(
                        f"compaction's first kept turn {first!r} cannot be reached: {exc.cause}",
                        session=session,
                        turn=compaction.turn_id,
                    ) from exc
                if before[-1][0] != first:
                    raise LedgerError(
                        f"compaction's first kept turn {first!r} does not exist in its ancestry",
                        session=session,
                        turn=compaction.turn_id,
                    )
                kept_ids += [r[0] for r in before if r[2] == "normal"]
        kept_ids.reverse()
        turns = self._turns(kept_ids, session, known)
        turns = self._pair_tool_results(session, turns, known)
        return History(
            session=session, head_turn_id=head, compaction=compaction, turns=tuple(turns)
        )

    def _earlier(
        self, session: str, start: str | None, known: Mapping[str, Turn] | None = None
    ) -> Iterator[Turn]:
        """The normal turns from ``start`` back to the root, newest first, read a few at a time
        (the search for a tool result's call usually ends one turn back)."""
        while start is not None:
            more = self._walk(session, start, "all", limit=_STEP)
            yield from self._turns([r[0] for r in more if r[2] == "normal"], session, known)
            start = more[-1][1]

    def _pair_tool_results(
        self, session: str, turns: list[Turn], known: Mapping[str, Turn] | None = None
    ) -> list[Turn]:
        """Extend the kept turns backwards, turn by turn, until every tool result has its call."""
        missing = unanswered(m for t in turns for m in t.messages)
        if not missing:
            return turns
        earlier: list[Turn] = []
        for t in self._earlier(session, turns[0].parent_id, known):
            earlier.append(t)
            for m in t.messages:
                for p in m.content:
                    if isinstance(p, ToolCallPart):
                        missing.pop(p.id, None)
            missing.update(unanswered(t.messages))  # a turn brought in needs its calls too
            if not missing:
                return [*reversed(earlier), *turns]
        call = next(iter(missing))
        holder = next(t.id for t in [*reversed(earlier), *turns] if call in unanswered(t.messages))
        raise LedgerError(
            f"tool result for call {call!r} has no tool call in its ancestry",
            session=session,
            turn=holder,
        )

    def _turns(
        self, ids: Sequence[str], session: str | None, known: Mapping[str, Turn] | None = None
    ) -> list[Turn]:
        """The turns ``ids`` with their messages, in the order given; those in ``known`` (decoded
        already: a turn never changes) are not read again."""
        known = known or {}
        found: dict[str, tuple[Any, ...]] = {}
        messages: dict[str, list[tuple[Any, ...]]] = {}
        columns = TURN_COLUMNS
        if self.db.schema_version < 2:  # a reader of a ledger not yet migrated
            columns = columns.replace("counted_by", "NULL")
        hashes = "content_hash" if self.db.schema_version >= 3 else "NULL"
        for chunk in chunks([i for i in ids if i not in known], 500):
            marks = ", ".join("?" * len(chunk))
            for row in self.db.rows(f"SELECT {columns} FROM turns WHERE id IN ({marks})", chunk):
                found[row[0]] = row
            for row in self.db.rows(
                f"SELECT turn_id, seq, role, content_json, context_json, token_count, {hashes} "
                f"FROM messages WHERE turn_id IN ({marks}) ORDER BY turn_id, seq",
                chunk,
            ):
                messages.setdefault(row[0], []).append(row)
        out = []
        for tid in ids:
            if tid in known:
                out.append(known[tid])
                continue
            got = found.get(tid)
            if got is None:
                raise LedgerError(
                    "broken ancestry: the turn does not exist", session=session, turn=tid
                )
            out.append(decode_turn(got, messages.get(tid, []), session))
            self.decoded += 1
        return out

    def _compaction(self, turn_id: str, session: str | None) -> Compaction:
        row = self.db.one(
            "SELECT turn_id, summary, first_kept_turn_id, tokens_before, tokens_after, trigger, "
            "summarizer, created_at FROM compactions WHERE turn_id = ?",
            (turn_id,),
        )
        if row is None:
            raise LedgerError(
                "compaction turn has no row in compactions", session=session, turn=turn_id
            )
        return Compaction(
            turn_id=row[0],
            summary=row[1],
            first_kept_turn_id=row[2],
            tokens_before=row[3],
            tokens_after=row[4],
            trigger=row[5],
            summarizer=row[6],
            created_at=row[7],
        )


class _Failing:
    """``LedgerReader._failing``: a plain class, as one runs on every request (a
    generator-based context manager costs several times as much)."""

    __slots__ = ("_database", "_session", "_turn")

    def __init__(self, database: str, session: str | None, turn: str | None) -> None:
        self._database, self._session, self._turn = database, session, turn

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _: TracebackType | None
    ) -> None:
        if exc is None:
            return
        session, turn, database = self._session, self._turn, self._database
        if isinstance(exc, LedgerError):
            if exc.database is None or exc.session is None:
                raise exc.located(session=session, turn=turn, database=database) from exc
        elif isinstance(exc, db_errors()):
            raise LedgerError(explain(exc), session=session, turn=turn, database=database) from exc
        elif isinstance(exc, UnicodeEncodeError):
            raise LedgerError(
                f"text that is not valid Unicode ({exc.reason} at position {exc.start})",
                session=session,
                turn=turn,
                database=database,
            ) from exc

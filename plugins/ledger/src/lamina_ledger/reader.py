"""The ledger's reading half: sessions, heads, histories (the latest compaction's summary, then
the kept turns), ancestries and statistics, each read in one snapshot transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self

from lamina import Message, ToolCallPart, ToolResultPart, Usage
from lamina_ledger.codec import load_context, load_parts
from lamina_ledger.db import Database, db_errors, explain
from lamina_ledger.errors import LedgerError
from lamina_ledger.records import Compaction, History, Stats, Turn

#: How far an ancestry walk may go before the ledger is taken to be looping.
MAX_DEPTH = 10_000_000
ROLES = ("system", "user", "assistant", "tool")
TURN_COLUMNS = (
    "id, type, parent_id, thread_id, model, provider, total_tokens, input_tokens, "
    "cached_input_tokens, cache_creation_tokens, output_tokens, started_at, completed_at, "
    "counted_by"
)
#: Turns read per step when looking further back for the call of a tool result.
_STEP = 15


class LedgerReader:
    """A ledger database opened for reading (``readonly``) or for reading and writing.

    ``target`` is an SQLite file path (created and migrated on first write) or a
    ``postgresql://`` URL. A reader never modifies the database.
    """

    def __init__(self, db: Database) -> None:
        self.db = db

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

    @contextmanager
    def _failing(self, session: str | None, turn: str | None = None) -> Iterator[None]:
        """Turn driver errors into ``LedgerError`` s naming the session and turn."""
        try:
            yield
        except LedgerError as exc:
            if exc.database is None or exc.session is None:
                raise exc.located(session=session, turn=turn, database=self.name) from exc
            raise
        except db_errors() as exc:
            raise LedgerError(explain(exc), session=session, turn=turn, database=self.name) from exc
        except UnicodeEncodeError as exc:
            raise LedgerError(
                f"text that is not valid Unicode ({exc.reason} at position {exc.start})",
                session=session,
                turn=turn,
                database=self.name,
            ) from exc

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
        summary, then the turns it kept and every turn since, tool calls paired with results."""
        with self._failing(session, at_turn), self.db.read():
            head = at_turn if at_turn is not None else self._head(session)
            if head is None:
                return History(session=session, head_turn_id=None, compaction=None, turns=())
            return self._history(session, head)

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
            for chunk in _chunks(list(ids), 500):
                marks = ", ".join("?" * len(chunk))
                found.update(
                    r[0] for r in self.db.rows(f"SELECT id FROM turns WHERE id IN ({marks})", chunk)
                )
            return found

    def compaction(self, turn_id: str, *, session: str | None = None) -> Compaction:
        with self._failing(session, turn_id), self.db.read():
            return self._compaction(turn_id, session)

    def stats(self, session: str) -> Stats:
        """Turns, compactions and provider-reported tokens over the session's ancestry."""
        with self._failing(session), self.db.read():
            head = self._head(session)
            totals = {"normal": [0] * 6, "compaction": [0] * 6}
            ids = [r[0] for r in self._walk(session, head, "all")] if head is not None else []
            for chunk in _chunks(ids, 500):
                marks = ", ".join("?" * len(chunk))
                for row in self.db.rows(
                    "SELECT type, count(*), sum(input_tokens), sum(cached_input_tokens), "
                    "sum(cache_creation_tokens), sum(output_tokens), count(input_tokens) "
                    f"FROM turns WHERE id IN ({marks}) GROUP BY type",
                    chunk,
                ):
                    acc = totals[row[0]]
                    for i, v in enumerate(row[1:]):
                        acc[i] += int(v or 0)
            n, c = totals["normal"], totals["compaction"]
            return Stats(
                session=session,
                turns=n[0],
                compactions=c[0],
                input_tokens=n[1] + c[1],
                cached_input_tokens=n[2] + c[2],
                cache_creation_tokens=n[3] + c[3],
                output_tokens=n[4] + c[4],
                turns_with_usage=n[5] + c[5],
            )

    # -- internals -----------------------------------------------------------------------

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

    def _history(self, session: str, head: str) -> History:
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
        turns = self._turns(kept_ids, session)
        turns = self._pair_tool_results(session, turns)
        return History(
            session=session, head_turn_id=head, compaction=compaction, turns=tuple(turns)
        )

    def _earlier(self, session: str, start: str | None) -> Iterator[Turn]:
        """The normal turns from ``start`` back to the root, newest first, read a few at a time
        (the search for a tool result's call usually ends one turn back)."""
        while start is not None:
            more = self._walk(session, start, "all", limit=_STEP)
            yield from self._turns([r[0] for r in more if r[2] == "normal"], session)
            start = more[-1][1]

    def _pair_tool_results(self, session: str, turns: list[Turn]) -> list[Turn]:
        """Extend the kept turns backwards, turn by turn, until every tool result has its call."""
        missing = unanswered(m for t in turns for m in t.messages)
        if not missing:
            return turns
        earlier: list[Turn] = []
        for t in self._earlier(session, turns[0].parent_id):
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

    def _turns(self, ids: Sequence[str], session: str | None) -> list[Turn]:
        """The turns ``ids`` with their messages, in the order given."""
        found: dict[str, tuple[Any, ...]] = {}
        messages: dict[str, list[tuple[Any, ...]]] = {}
        columns = TURN_COLUMNS
        if self.db.schema_version < 2:  # a reader of a ledger not yet migrated
            columns = columns.replace("counted_by", "NULL")
        for chunk in _chunks(list(ids), 500):
            marks = ", ".join("?" * len(chunk))
            for row in self.db.rows(f"SELECT {columns} FROM turns WHERE id IN ({marks})", chunk):
                found[row[0]] = row
            for row in self.db.rows(
                "SELECT turn_id, seq, role, content_json, context_json, token_count "
                f"FROM messages WHERE turn_id IN ({marks}) ORDER BY turn_id, seq",
                chunk,
            ):
                messages.setdefault(row[0], []).append(row)
        out = []
        for tid in ids:
            got = found.get(tid)
            if got is None:
                raise LedgerError(
                    "broken ancestry: the turn does not exist", session=session, turn=tid
                )
            out.append(_turn(got, messages.get(tid, []), session))
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


def unanswered(messages: Iterator[Message] | Sequence[Message]) -> dict[str, None]:
    """The call ids of tool results in ``messages`` whose call does not come before them
    (in order, as a dict used as an ordered set)."""
    calls: set[str] = set()
    missing: dict[str, None] = {}
    for m in messages:
        for p in m.content:
            if isinstance(p, ToolCallPart):
                calls.add(p.id)
            elif isinstance(p, ToolResultPart) and p.call_id not in calls:
                missing.setdefault(p.call_id, None)
    return missing


def _turn(row: tuple[Any, ...], messages: list[tuple[Any, ...]], session: str | None) -> Turn:
    out, tokens = [], []
    for m in messages:
        try:
            parts = load_parts(m[3])
            context = load_context(m[4])
        except ValueError as exc:
            raise LedgerError(f"message {m[1]}: {exc}", session=session, turn=row[0]) from exc
        if m[2] not in ROLES:
            raise LedgerError(
                f"message {m[1]}: unknown role {m[2]!r}", session=session, turn=row[0]
            )
        out.append(Message(role=m[2], content=parts, context_json=context))
        tokens.append(m[5])
    usage = None
    if row[7] is not None:
        usage = Usage(
            input_tokens=int(row[7]),
            cached_input_tokens=int(row[8] or 0),
            cache_creation_tokens=int(row[9] or 0),
            output_tokens=int(row[10] or 0),
        )
    return Turn(
        id=row[0],
        type=row[1],
        parent_id=row[2],
        thread_id=row[3],
        model=row[4],
        provider=row[5],
        total_tokens=row[6],
        counted_by=row[13],
        usage=usage,
        started_at=row[11],
        completed_at=row[12],
        messages=tuple(out),
        message_tokens=tuple(tokens),
    )


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]

"""The Agents Ledger: the writer hosts append turns and compactions through, and the reader
assembly walks a thread's ancestry with. Every method runs in one transaction; reads see a
snapshot, writes are all or nothing, and every failure names the session, the turn and why."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from lamina import Message, ToolCallPart, ToolResultPart, Usage
from lamina_ledger.codec import dump_parts, load_context, load_parts
from lamina_ledger.db import Database, db_errors, explain
from lamina_ledger.errors import LedgerError
from lamina_ledger.records import TRIGGERS, Compaction, History, Stats, Trigger, Turn

#: How far an ancestry walk may go before the ledger is taken to be looping.
MAX_DEPTH = 10_000_000
_ROLES = ("system", "user", "assistant", "tool")
_TURN_COLUMNS = (
    "id, type, parent_id, thread_id, model, provider, total_tokens, input_tokens, "
    "cached_input_tokens, cache_creation_tokens, output_tokens, started_at, completed_at"
)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def new_id() -> str:
    """A fresh turn or thread id."""
    return uuid.uuid4().hex


class Ledger:
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
    ) -> Ledger:
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

    def __enter__(self) -> Ledger:
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
                raise LedgerError(
                    exc.cause,
                    session=exc.session if exc.session is not None else session,
                    turn=exc.turn if exc.turn is not None else turn,
                    database=self.name,
                ) from exc
            raise
        except db_errors() as exc:
            raise LedgerError(explain(exc), session=session, turn=turn, database=self.name) from exc

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

    def compaction(self, turn_id: str, *, session: str | None = None) -> Compaction:
        with self._failing(session, turn_id), self.db.read():
            return self._compaction(turn_id, session)

    def stats(self, session: str) -> Stats:
        """Turns, compactions and provider-reported tokens over the session's ancestry."""
        with self._failing(session), self.db.read():
            head = self._head(session)
            zero = Stats(
                session=session,
                turns=0,
                compactions=0,
                input_tokens=0,
                cached_input_tokens=0,
                cache_creation_tokens=0,
                output_tokens=0,
                turns_with_usage=0,
            )
            if head is None:
                return zero
            walked = self._walk(session, head, "all")
            ids = [r[0] for r in walked]
            totals = {"normal": [0] * 6, "compaction": [0] * 6}
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

    # -- writing -------------------------------------------------------------------------

    @contextmanager
    def batch(self, session: str | None = None) -> Iterator[Ledger]:
        """One transaction around several writes: all of them land, or none does."""
        with self._failing(session), self.db.write():
            yield self

    def create_session(self, session: str) -> None:
        """Create ``session`` with no turns yet (nothing happens when it exists)."""
        with self._failing(session), self.db.write():
            self._thread_for_write(session, "")

    def append_turn(
        self,
        session: str,
        messages: Sequence[Message],
        *,
        usage: Usage | None = None,
        model: str | None = None,
        provider: str | None = None,
        total_tokens: int | None = None,
        message_tokens: Sequence[int | None] | None = None,
        parent_turn_id: str | None = None,
        turn_id: str | None = None,
        started_at: str | None = None,
        completed_at: str | None = None,
    ) -> str:
        """Append one turn (its messages and usage) to the session and make it the head.

        The session is created on its first turn. ``parent_turn_id`` defaults to the head; a
        different one must exist. ``total_tokens`` is the exact size of the messages in history
        when the host knows it. Returns the new turn's id.
        """
        turn_id = turn_id or new_id()
        rows = self._message_rows(session, turn_id, messages, message_tokens)
        if total_tokens is not None and total_tokens < 0:
            raise LedgerError("total_tokens must be >= 0", session=session, turn=turn_id)
        with self._failing(session, turn_id), self.db.write():
            thread = self._thread_for_write(session, turn_id)
            parent = self._parent_for_write(session, turn_id, thread, parent_turn_id)
            self._insert_turn(
                turn_id,
                "normal",
                parent,
                thread,
                model=model,
                provider=provider,
                total_tokens=total_tokens,
                usage=usage,
                started_at=started_at,
                completed_at=completed_at,
            )
            for row in rows:
                self.db.execute(
                    "INSERT INTO messages (turn_id, seq, role, content_json, context_json, "
                    "token_count) VALUES (?, ?, ?, ?, ?, ?)",
                    row,
                )
            self._move_head(session, thread, turn_id)
        return turn_id

    def record_compaction(
        self,
        session: str,
        summary: str,
        first_kept_turn_id: str | None,
        *,
        tokens_before: int | None = None,
        tokens_after: int | None = None,
        trigger: Trigger = "manual",
        summarizer: str | None = None,
        parent_turn_id: str | None = None,
        turn_id: str | None = None,
        created_at: str | None = None,
    ) -> str:
        """Append a compaction turn: ``summary`` stands for every turn before
        ``first_kept_turn_id`` (``None``: for every turn so far). Existing rows are untouched."""
        turn_id = turn_id or new_id()
        if trigger not in TRIGGERS:
            raise LedgerError(
                f"unknown compaction trigger {trigger!r}; known: {', '.join(TRIGGERS)}",
                session=session,
                turn=turn_id,
            )
        with self._failing(session, turn_id), self.db.write():
            thread = self._thread_for_write(session, turn_id)
            parent = self._parent_for_write(session, turn_id, thread, parent_turn_id)
            if first_kept_turn_id is not None:
                if parent is None:
                    raise LedgerError(
                        f"first kept turn {first_kept_turn_id!r} is not in the session",
                        session=session,
                        turn=turn_id,
                    )
                walked = self._walk(session, parent, "until", first_kept_turn_id)
                if walked[-1][0] != first_kept_turn_id:
                    raise LedgerError(
                        f"first kept turn {first_kept_turn_id!r} is not an ancestor of the "
                        "compaction",
                        session=session,
                        turn=turn_id,
                    )
            stamp = created_at or _now()
            self._insert_turn(
                turn_id,
                "compaction",
                parent,
                thread,
                total_tokens=tokens_after,
                started_at=stamp,
                completed_at=stamp,
            )
            self.db.execute(
                "INSERT INTO compactions (turn_id, summary, first_kept_turn_id, tokens_before, "
                "tokens_after, trigger, summarizer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    turn_id,
                    summary,
                    first_kept_turn_id,
                    tokens_before,
                    tokens_after,
                    trigger,
                    summarizer,
                    stamp,
                ),
            )
            self._move_head(session, thread, turn_id)
        return turn_id

    def fork(self, session: str, new_session: str, *, at_turn: str | None = None) -> str:
        """Start ``new_session`` on a new thread whose ancestry is ``session``'s up to
        ``at_turn`` (default: its head); the two share those turns. Returns the thread id."""
        with self._failing(new_session, at_turn), self.db.write():
            if self.db.one("SELECT 1 FROM sessions WHERE label = ?", (new_session,)):
                raise LedgerError("the session already exists", session=new_session)
            head = at_turn if at_turn is not None else self._head(session)
            if head is not None:
                self._walk(session, head, "all")  # exists, with an unbroken ancestry
            thread, stamp = new_id(), _now()
            self.db.execute(
                "INSERT INTO threads (id, head_turn_id, forked_from_turn_id, created_at) "
                "VALUES (?, ?, ?, ?)",
                (thread, head, head, stamp),
            )
            self.db.execute(
                "INSERT INTO sessions (label, thread_id, created_at, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (new_session, thread, stamp, stamp),
            )
        return thread

    # -- internals: reading --------------------------------------------------------------

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
        cond = {
            "all": "1 = 1",
            "compaction": "walk.type = 'normal'",
            "until": "walk.id <> ?",
        }[mode]
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
            mode == "all"
            or (mode == "compaction" and last_type == "compaction")
            or (mode == "until" and last_id == stop)
        )
        if not ended and last_parent is not None:
            raise LedgerError(
                f"broken ancestry: its parent turn {last_parent!r} does not exist",
                session=session,
                turn=last_id,
            )
        if mode == "all" and last_parent is not None:
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

    def _pair_tool_results(self, session: str, turns: list[Turn]) -> list[Turn]:
        """Extend the kept turns backwards, turn by turn, until every tool result has its call."""
        calls: set[str] = set()
        missing: dict[str, str] = {}  # call id -> turn holding its result
        for t in turns:
            for m in t.messages:
                for p in m.content:
                    if isinstance(p, ToolCallPart):
                        calls.add(p.id)
                    elif isinstance(p, ToolResultPart) and p.call_id not in calls:
                        missing.setdefault(p.call_id, t.id)
        while missing:
            parent = turns[0].parent_id
            more = self._walk(session, parent, "all", limit=15) if parent is not None else []
            for t in self._turns([r[0] for r in more if r[2] == "normal"], session):
                turns.insert(0, t)
                for m in t.messages:
                    for p in m.content:
                        if isinstance(p, ToolCallPart):
                            missing.pop(p.id, None)
                if not missing:
                    return turns
            if not more or more[-1][1] is None:
                call, turn = next(iter(missing.items()))
                raise LedgerError(
                    f"tool result for call {call!r} has no tool call in its ancestry",
                    session=session,
                    turn=turn,
                )
        return turns

    def _turns(self, ids: Sequence[str], session: str | None) -> list[Turn]:
        """The turns ``ids`` with their messages, in the order given."""
        found: dict[str, tuple[Any, ...]] = {}
        messages: dict[str, list[tuple[Any, ...]]] = {}
        for chunk in _chunks(list(ids), 500):
            marks = ", ".join("?" * len(chunk))
            for row in self.db.rows(
                f"SELECT {_TURN_COLUMNS} FROM turns WHERE id IN ({marks})", chunk
            ):
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

    # -- internals: writing --------------------------------------------------------------

    def _message_rows(
        self,
        session: str,
        turn_id: str,
        messages: Sequence[Message],
        message_tokens: Sequence[int | None] | None,
    ) -> list[tuple[Any, ...]]:
        if message_tokens is not None and len(message_tokens) != len(messages):
            raise LedgerError(
                f"{len(message_tokens)} message token counts for {len(messages)} messages",
                session=session,
                turn=turn_id,
            )
        rows = []
        for seq, m in enumerate(messages):
            if not isinstance(m, Message):
                raise LedgerError(
                    f"message {seq} is a {type(m).__name__}, expected lamina.Message",
                    session=session,
                    turn=turn_id,
                )
            if m.role not in _ROLES:
                raise LedgerError(
                    f"message {seq} has unknown role {m.role!r}", session=session, turn=turn_id
                )

            context = None if m.context_json is None else json.dumps(m.context_json, sort_keys=True)
            tokens = None if message_tokens is None else message_tokens[seq]
            rows.append((turn_id, seq, m.role, dump_parts(m.content), context, tokens))
        return rows

    def _thread_for_write(self, session: str, turn_id: str) -> str:
        row = self.db.one("SELECT thread_id FROM sessions WHERE label = ?", (session,))
        if row is not None:
            return str(row[0])
        thread, stamp = new_id(), _now()
        self.db.execute(
            "INSERT INTO threads (id, head_turn_id, forked_from_turn_id, created_at) "
            "VALUES (?, NULL, NULL, ?)",
            (thread, stamp),
        )
        self.db.execute(
            "INSERT INTO sessions (label, thread_id, created_at, updated_at) VALUES (?, ?, ?, ?)",
            (session, thread, stamp, stamp),
        )
        return thread

    def _parent_for_write(
        self, session: str, turn_id: str, thread: str, parent: str | None
    ) -> str | None:
        if self.db.one("SELECT 1 FROM turns WHERE id = ?", (turn_id,)):
            raise LedgerError("a turn with this id already exists", session=session, turn=turn_id)
        if parent is None:
            row = self.db.one("SELECT head_turn_id FROM threads WHERE id = ?", (thread,))
            return None if row is None else row[0]
        if not self.db.one("SELECT 1 FROM turns WHERE id = ?", (parent,)):
            raise LedgerError(
                f"parent turn {parent!r} does not exist", session=session, turn=turn_id
            )
        return parent

    def _insert_turn(
        self,
        turn_id: str,
        kind: str,
        parent: str | None,
        thread: str,
        *,
        model: str | None = None,
        provider: str | None = None,
        total_tokens: int | None = None,
        usage: Usage | None = None,
        started_at: str | None = None,
        completed_at: str | None = None,
    ) -> None:
        stamp = _now()
        self.db.execute(
            f"INSERT INTO turns ({_TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                turn_id,
                kind,
                parent,
                thread,
                model,
                provider,
                total_tokens,
                None if usage is None else usage.input_tokens,
                None if usage is None else usage.cached_input_tokens,
                None if usage is None else usage.cache_creation_tokens,
                None if usage is None else usage.output_tokens,
                started_at or stamp,
                completed_at or stamp,
            ),
        )

    def _move_head(self, session: str, thread: str, turn_id: str) -> None:
        self.db.execute("UPDATE threads SET head_turn_id = ? WHERE id = ?", (turn_id, thread))
        self.db.execute("UPDATE sessions SET updated_at = ? WHERE label = ?", (_now(), session))


def _turn(row: tuple[Any, ...], messages: list[tuple[Any, ...]], session: str | None) -> Turn:
    out, tokens = [], []
    for m in messages:
        try:
            parts = load_parts(m[3])
            context = load_context(m[4])
        except ValueError as exc:
            raise LedgerError(f"message {m[1]}: {exc}", session=session, turn=row[0]) from exc
        if m[2] not in _ROLES:
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
        usage=usage,
        started_at=row[11],
        completed_at=row[12],
        messages=tuple(out),
        message_tokens=tuple(tokens),
    )


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]

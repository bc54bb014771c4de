"""The ledger's writing half: sessions, turns, compactions and forks, each in one transaction.

Writers of one session take turns (``Database.serialize``: SQLite's ``BEGIN IMMEDIATE``, a
PostgreSQL advisory lock) and read the head inside the transaction that moves it; the move is
also checked against the head read, so a turn acknowledged to one writer is never taken off
the ancestry by another. A compaction goes on top of whatever was appended since its history
was read, and never stands for a turn its summary did not see."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from lamina import Message, ToolCallPart, Usage
from lamina_ledger.chain import PrefixChain
from lamina_ledger.db import Database
from lamina_ledger.errors import LedgerConflict, LedgerError
from lamina_ledger.prefix import Prefix
from lamina_ledger.pricing import cost as priced
from lamina_ledger.reader import TURN_COLUMNS, LedgerReader, unanswered
from lamina_ledger.records import TRIGGERS, Trigger
from lamina_ledger.rows import check_cost, check_count, message_rows


def _now() -> str:
    return datetime.now(UTC).isoformat()


def new_id() -> str:
    """A fresh turn or thread id."""
    return uuid.uuid4().hex


class LedgerWriter(LedgerReader):
    """The reader plus the writes: ``append_turn``, ``record_compaction``, ``create_session``,
    ``fork`` and ``batch`` (several writes, one transaction)."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        #: The prefix block lists of the turns written last (to compare the next turn's with).
        self.prefixes = PrefixChain()

    @contextmanager
    def batch(self, session: str | None = None) -> Iterator[LedgerWriter]:
        """One transaction around several writes: all of them land, or none does."""
        with self._failing(session), self.db.write():
            yield self

    def create_session(self, session: str) -> None:
        """Create ``session`` with no turns yet (nothing happens when it exists)."""
        with self._failing(session), self.db.write():
            self._thread_for_write(session)

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
        counted_by: str | None = None,
        parent_turn_id: str | None = None,
        turn_id: str | None = None,
        started_at: str | None = None,
        completed_at: str | None = None,
        stop_reason: str | None = None,
        error: str | None = None,
        cost: float | None = None,
        prefix: Prefix | None = None,
    ) -> str:
        """Append one turn (its messages and usage) to the session and make it the head.

        The session is created on its first turn. ``parent_turn_id`` defaults to the head; a
        different one must exist. ``total_tokens`` and ``message_tokens`` are the exact size of
        the messages in history as the tokenizer named ``counted_by`` counts them (assembly
        trusts them only for that tokenizer). A tool result must have its call in this turn or
        before it. ``stop_reason`` and ``error`` are the agent's; ``cost`` (US dollars) is the
        usage at models.dev's prices unless given. ``prefix`` is the stable prefix the turn's
        request was assembled with: when the parent turn's is known and this one does not
        start with it, the turn is a cache bust naming the first block that changed. Returns
        the new turn's id.
        """
        turn_id = turn_id or new_id()
        rows = message_rows(session, turn_id, messages, message_tokens)
        check_count(total_tokens, "total_tokens", session, turn_id)
        if cost is None:
            cost = priced(provider, model, usage)
        check_cost(cost, session, turn_id)
        if prefix is not None:
            check_count(prefix.tokens, "the prefix's tokens", session, turn_id)
        for what, text in (("stop_reason", stop_reason), ("error", error)):
            if text is not None and not isinstance(text, str):
                raise LedgerError(f"{what} must be a string", session=session, turn=turn_id)
        with self._failing(session, turn_id), self.db.write():
            thread, head = self._thread_for_write(session)
            self._fresh(session, turn_id)
            parent = head if parent_turn_id is None else self._existing(session, parent_turn_id)
            self._check_results(session, turn_id, messages, parent)
            facts = {"cost": cost, "stop_reason": stop_reason, "error": error}
            facts.update(self.prefixes.row(self.db, turn_id, parent, prefix).columns())
            self._insert_turn(
                turn_id,
                "normal",
                parent,
                thread,
                model=model,
                provider=provider,
                total_tokens=total_tokens,
                counted_by=counted_by,
                usage=usage,
                started_at=started_at,
                completed_at=completed_at,
                facts=facts,
            )
            for row in rows:
                self.db.execute(
                    "INSERT INTO messages (turn_id, seq, role, content_json, context_json, "
                    "token_count, content_hash) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
            self._move_head(session, thread, turn_id, head)
            # Not in a batch: it may still roll back.
            written = self._written(turn_id, session) if self.db.depth == 1 else None
        if written is not None and parent is not None:  # committed: remembered as read
            self._remember_appended(session, parent, written, rows)
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
        expected_head: str | None = None,
        turn_id: str | None = None,
        created_at: str | None = None,
    ) -> str:
        """Append a compaction turn: ``summary`` stands for every turn before
        ``first_kept_turn_id`` (``None``: for every turn so far). Existing rows are untouched.

        Its parent is ``parent_turn_id`` when given, else the head when the compaction is
        written. ``expected_head`` is the head the summary was made from: turns appended since
        stay after the compaction (kept, never summarized unseen); if the head moved to another
        branch meanwhile, ``LedgerConflict`` says to read the session again."""
        turn_id = turn_id or new_id()
        if trigger not in TRIGGERS:
            raise LedgerError(
                f"unknown compaction trigger {trigger!r}; known: {', '.join(TRIGGERS)}",
                session=session,
                turn=turn_id,
            )
        if not isinstance(summary, str):
            raise LedgerError("the summary must be a string", session=session, turn=turn_id)
        check_count(tokens_before, "tokens_before", session, turn_id)
        check_count(tokens_after, "tokens_after", session, turn_id)
        with self._failing(session, turn_id), self.db.write():
            thread, head = self._thread_for_write(session)
            self._fresh(session, turn_id)
            parent: str | None
            if parent_turn_id is not None:
                parent = self._existing(session, parent_turn_id)
            else:
                parent = head
                if expected_head is not None and head != expected_head:
                    first_kept_turn_id = self._since(
                        session, turn_id, head, expected_head, first_kept_turn_id
                    )
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
            self._move_head(session, thread, turn_id, head)
        return turn_id

    def fork(self, session: str, new_session: str, *, at_turn: str | None = None) -> str:
        """Start ``new_session`` on a new thread whose ancestry is ``session``'s up to
        ``at_turn`` (default: its head); the two share those turns. Returns the thread id."""
        with self._failing(new_session, at_turn), self.db.write():
            self.db.serialize(f"session:{new_session}")
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

    # -- internals -----------------------------------------------------------------------

    def _thread_for_write(self, session: str) -> tuple[str, str | None]:
        """The session's thread and head, read once this transaction holds the session (the
        session is created on its first write)."""
        self.db.serialize(f"session:{session}")
        row = self.db.one(
            "SELECT s.thread_id, t.head_turn_id FROM sessions s "
            "JOIN threads t ON t.id = s.thread_id WHERE s.label = ?",
            (session,),
        )
        if row is not None:
            return str(row[0]), row[1]
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
        return thread, None

    def _fresh(self, session: str, turn_id: str) -> None:
        if self.db.one("SELECT 1 FROM turns WHERE id = ?", (turn_id,)):
            raise LedgerError("a turn with this id already exists", session=session, turn=turn_id)

    def _existing(self, session: str, parent: str) -> str:
        if not self.db.one("SELECT 1 FROM turns WHERE id = ?", (parent,)):
            raise LedgerError(f"parent turn {parent!r} does not exist", session=session)
        return parent

    def _check_results(
        self, session: str, turn_id: str, messages: Sequence[Message], parent: str | None
    ) -> None:
        """Refuse a tool result whose call is neither earlier in the turn nor in its ancestry:
        such a session could never be read again."""
        missing = unanswered(messages)
        if missing:
            for turn in self._earlier(session, parent):
                for m in turn.messages:
                    for p in m.content:
                        if isinstance(p, ToolCallPart):
                            missing.pop(p.id, None)
                if not missing:
                    return
            raise LedgerError(
                f"tool result for call {next(iter(missing))!r} has no tool call before it",
                session=session,
                turn=turn_id,
            )

    def _since(
        self, session: str, turn_id: str, head: str | None, expected: str, first_kept: str | None
    ) -> str | None:
        """The first kept turn of a compaction made from ``expected`` now that the head is
        ``head``: unchanged, or (when it was to stand for every turn) the oldest turn appended
        since, so no turn is summarized that the summary never saw."""
        walked = self._walk(session, head, "until", expected) if head is not None else []
        if not walked or walked[-1][0] != expected:
            raise LedgerConflict(
                f"the session's head moved off turn {expected!r} (to another branch) while the "
                "compaction was made; read the session again",
                session=session,
                turn=turn_id,
            )
        if first_kept is None:
            appended = [r[0] for r in walked[:-1] if r[2] == "normal"]
            return appended[-1] if appended else None
        return first_kept

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
        counted_by: str | None = None,
        usage: Usage | None = None,
        started_at: str | None = None,
        completed_at: str | None = None,
        facts: Mapping[str, Any] | None = None,
    ) -> None:
        """One ``turns`` row; ``facts`` are further columns (cost, stop reason, prefix)."""
        stamp = _now()
        for what, value in (("started_at", started_at), ("completed_at", completed_at)):
            if value is not None and not isinstance(value, str):
                raise LedgerError(f"{what} must be a string (an ISO 8601 time)", turn=turn_id)
        counts = (
            (None,) * 4
            if usage is None
            else (
                usage.input_tokens,
                usage.cached_input_tokens,
                usage.cache_creation_tokens,
                usage.output_tokens,
            )
        )
        for count in counts:
            check_count(count, "usage", None, turn_id)
        facts = facts or {}
        columns = ", ".join([TURN_COLUMNS, *facts])
        marks = ", ".join("?" * (14 + len(facts)))
        self.db.execute(
            f"INSERT INTO turns ({columns}) VALUES ({marks})",
            (
                turn_id,
                kind,
                parent,
                thread,
                model,
                provider,
                total_tokens,
                *counts,
                started_at or stamp,
                completed_at or stamp,
                counted_by,
                *facts.values(),
            ),
        )

    def _move_head(self, session: str, thread: str, turn_id: str, head: str | None) -> None:
        """Make ``turn_id`` the head, provided the head is still ``head`` (it is: the session
        is held; the check makes the promise explicit)."""
        same = (
            "head_turn_id IS ?"
            if self.db.dialect == "sqlite"
            else ("head_turn_id IS NOT DISTINCT FROM ?")
        )
        moved = self.db.execute(
            f"UPDATE threads SET head_turn_id = ? WHERE id = ? AND {same}",
            (turn_id, thread, head),
        )
        if moved.rowcount != 1:
            raise LedgerConflict(
                "another writer moved the session's head meanwhile; nothing was written",
                session=session,
                turn=turn_id,
            )
        # The session's version moves with its head, in the same transaction: readers that
        # kept its decoded history see at once that it changed.
        self.db.execute(
            "UPDATE sessions SET updated_at = ?, version = version + 1 WHERE label = ?",
            (_now(), session),
        )

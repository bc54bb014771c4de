"""The ledger as a session store (``lamina_session_stores``): what ``lamina serve`` assembles
stored sessions with (compacting first when a turn would not fit), records finished turns into
(with the provider's usage, for cache statistics) and compacts and totals sessions by.

One ``LedgerSession`` (one open ledger) per assembler, opened on first use and closed by
``close``."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from lamina import (
    AgentResult,
    AssembledContext,
    AssemblyRequest,
    CompactionOutcome,
    CompactionRequest,
    ConfigError,
    Event,
    SessionStats,
    SessionStore,
    Usage,
)
from lamina_ledger.db import db_errors
from lamina_ledger.errors import LedgerConflict, LedgerError
from lamina_ledger.session import LedgerSession
from lamina_ledger.settings import LedgerSettings

NAME = "ledger"
#: Session labels a store remembers having created (the least recently used is forgotten).
STARTED = 4096


class _Session(LedgerSession):
    """A ``LedgerSession`` that remembers which sessions it created."""

    def __init__(self, assembler: Any, *, plugin: str, settings: LedgerSettings) -> None:
        super().__init__(assembler, plugin=plugin, settings=settings)
        self.started: OrderedDict[str, None] = OrderedDict()
        self.lock = threading.Lock()

    def start_once(self, label: str) -> None:
        """Create ``label`` unless this store already did (a host's first call for a new
        conversation is usually an assembly)."""
        with self.lock:
            if label in self.started:
                self.started.move_to_end(label)
                return
        self.start(label)
        with self.lock:
            self.started[label] = None
            while len(self.started) > STARTED:
                self.started.popitem(last=False)


class LedgerStore:
    """The callables of the ``ledger`` session store, with one session per assembler."""

    def __init__(self, settings: LedgerSettings, plugin: str = NAME) -> None:
        self.settings = settings
        self.plugin = plugin
        self._sessions: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def session(self, assembler: Any) -> _Session:
        with self._lock:
            found = self._sessions.get(assembler)
            if found is None:
                found = _Session(assembler, plugin=self.plugin, settings=self.settings)
                self._sessions[assembler] = found
            return found

    def assemble(self, assembler: Any, request: AssemblyRequest) -> AssembledContext:
        session = self.session(assembler)
        session.start_once(request.session_label)
        try:
            return session.assemble(request)
        finally:
            session.compactions.clear()  # the service keeps no history of them

    async def aassemble(self, assembler: Any, request: AssemblyRequest) -> AssembledContext:
        return await asyncio.to_thread(self.assemble, assembler, request)

    def record(self, assembler: Any, label: str, result: AgentResult) -> str:
        session = self.session(assembler)
        config = assembler.config
        request = AssemblyRequest(
            session_label=label,
            event=Event(content=""),
            model=result.model or config.model,
            provider=result.provider or config.provider,
        )
        try:
            return session.record_turn(
                request,
                result.messages,
                usage=None if result.usage == Usage() else result.usage,
                parent_turn_id=result.parent_turn_id,
                stop_reason=result.stop_reason,
                error=result.error,
            )
        except LedgerError as exc:
            if _refused(exc):  # the turn itself is wrong (an orphan tool result, say)
                raise ConfigError(str(exc), key="messages") from exc
            raise

    def compact(
        self, assembler: Any, request: AssemblyRequest, compaction: CompactionRequest
    ) -> CompactionOutcome:
        session = self.session(assembler)
        label = request.session_label
        with _known(label):
            session.ledger.head(label)
        done = session.compact(
            request,
            share=compaction.target,
            trigger=compaction.trigger,
            instructions=compaction.instructions,
        )
        session.compactions.clear()
        if done is None:
            return CompactionOutcome(
                session_label=label,
                compacted=False,
                trigger=compaction.trigger,
                warnings=(
                    f"nothing to compact (the newest {session.settings.minimum_turns} turns "
                    "are always kept)",
                ),
            )
        return CompactionOutcome(
            session_label=label,
            compacted=True,
            trigger=done.trigger,
            turn_id=done.turn_id,
            summarized_turns=done.summarized_turns,
            kept_turns=done.kept_turns,
            tokens_before=done.tokens_before,
            tokens_after=done.tokens_after,
            warnings=done.warnings,
        )

    def stats(self, assembler: Any, label: str) -> SessionStats:
        with _known(label):
            s = self.session(assembler).ledger.stats(label)
        return SessionStats(
            session_label=label,
            turns=s.turns,
            compactions=s.compactions,
            input_tokens=s.input_tokens,
            cached_input_tokens=s.cached_input_tokens,
            cache_creation_tokens=s.cache_creation_tokens,
            output_tokens=s.output_tokens,
            turns_with_usage=s.turns_with_usage,
            cache_hit_ratio=s.cache_hit_ratio,
            details={
                "cost": s.cost,
                "priced_turns": s.priced_turns,
                "cache_busts": s.cache_busts,
            },
        )

    def turn_stats(self, assembler: Any, label: str) -> dict[str, Any]:
        """``lamina ledger stats LABEL --per-turn --json``, as data."""
        from lamina_ledger.stats import report_data, turn_report

        with _known(label):
            return report_data(turn_report(self.session(assembler).ledger, label))

    def stats_page(self, assembler: Any, label: str) -> str:
        """``lamina ledger stats LABEL --html``."""
        from lamina_ledger.stats import turn_report
        from lamina_ledger.stats_page import render_stats_html

        with _known(label):
            return render_stats_html(turn_report(self.session(assembler).ledger, label))

    def close(self, assembler: Any) -> None:
        with self._lock:
            found = self._sessions.pop(assembler, None)
        if found is not None:
            found.close()

    def as_record(self) -> SessionStore:
        return SessionStore(
            name=self.plugin,
            assemble=self.assemble,
            aassemble=self.aassemble,
            record=self.record,
            compact=self.compact,
            stats=self.stats,
            close=self.close,
            turn_stats=self.turn_stats,
            stats_page=self.stats_page,
            description="sessions in the Agents Ledger: proactive compaction, turns with usage",
        )


@contextmanager
def _known(label: str) -> Iterator[None]:
    """A ledger's "no such session" as the ``LookupError`` the store contract promises."""
    try:
        yield
    except LedgerError as exc:
        if exc.cause == "no such session":
            raise LookupError(f"no session {label!r} in the ledger") from exc
        raise


def _refused(exc: LedgerError) -> bool:
    """Whether the ledger refused what it was given (no database failure behind it, no lost
    race): the host's request was wrong."""
    if isinstance(exc, LedgerConflict):
        return False
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, (*db_errors(), OSError)):
            return False
        cause = cause.__cause__
    return True


def session_store(settings: LedgerSettings, plugin: str = NAME) -> SessionStore:
    """The ``ledger`` session store for one assembler's settings."""
    return LedgerStore(settings, plugin).as_record()

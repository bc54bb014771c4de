"""The host's side: assemble with proactive compaction, recover from a reported overflow,
record each finished turn with its exact size and the provider's usage."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from attrs import evolve

from lamina import (
    AssembledContext,
    Assembler,
    AssemblyRequest,
    BudgetError,
    ConfigError,
    Message,
    Summarizer,
    Usage,
)
from lamina_ledger.aio import AsyncCalls
from lamina_ledger.compaction import CompactionResult, compact_history
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger
from lamina_ledger.locks import SessionLocks
from lamina_ledger.pool import POOL
from lamina_ledger.prefix import Prefixes
from lamina_ledger.provenance import with_user_context
from lamina_ledger.reads import Reads, budget_key, continued, event_bound
from lamina_ledger.recent import SESSIONS, Recent
from lamina_ledger.records import Trigger
from lamina_ledger.settings import LedgerSettings, settings_from
from lamina_ledger.sizing import Sizes, message_counts
from lamina_ledger.summarizer import NAME as DEFAULT_SUMMARIZER
from lamina_ledger.summarizer import summarizer as default_summarizer
from lamina_ledger.trigger import due, edited, fits, history_limit
from lamina_ledger.user_context import user_context
from lamina_ledger.vouch import vouched

R = TypeVar("R")
#: What ``LedgerSession._measure`` found when the request is to compact first: (available
#: tokens, tokens outside history, the context when it fits whole and is only over
#: ``compact_when``).
Measured = tuple[int, int, AssembledContext | None]


class LedgerSession(AsyncCalls, Reads):
    """Everything a host needs around one ``Assembler`` whose config has a ``[plugins.ledger]``
    database: ``assemble`` (compacts first when the context would not fit), ``run`` (sends,
    and on a context-overflow error compacts harder and retries once), ``record_turn``,
    ``compact`` and the ``ledger`` itself (reader and writer).

    Safe to share between threads and asyncio tasks (``aassemble``, ``arecord_turn``,
    ``acompact`` and ``arecover`` run the same calls on a worker thread): one session's
    assemblies and compactions take turns (so two requests never both compact it), other
    sessions' run side by side, and every write is one transaction on the ledger's connection,
    which serves one transaction at a time. Nothing recorded concurrently is lost."""

    def __init__(
        self,
        assembler: Assembler,
        *,
        plugin: str = "ledger",
        settings: LedgerSettings | None = None,
    ) -> None:
        self.assembler = assembler
        self.plugin = plugin
        self.settings = settings or settings_from(assembler.config, plugin)
        target = self.settings.target(assembler.config)
        if target is None:
            raise ConfigError(
                "no ledger database configured",
                file=assembler.config.path,
                key=f"plugins.{plugin}.database",
            )
        self.ledger = Ledger.open(
            target,
            busy_timeout=self.settings.busy_timeout,
            connect_timeout=self.settings.connect_timeout,
        )
        # The history provider reads through this ledger while the session is open: one
        # connection, and one remembered history per session for both.
        self.target = target
        POOL.lend(target, self.ledger)
        self.compactions: list[CompactionResult] = []
        # Per session (model, budget, role): (available, tokens outside history, event tokens,
        # whether the kernel edited tool results) as the last assembly showed them, to know
        # beforehand whether the next one fits.
        # These per-session memories keep the SESSIONS labels used last (lamina_ledger.recent).
        self._seen: Recent[tuple[Any, ...], tuple[int, int, int, bool]] = Recent(SESSIONS)
        self._sizes = Sizes(SESSIONS)
        self._locks = SessionLocks()  # one session's assemblies and compactions take turns
        # Per session: the last request assembled and when (its user message's context_json).
        self._assembled: Recent[str, tuple[AssemblyRequest, datetime]] = Recent(SESSIONS)
        self._noted = threading.local()  # per thread: the running assembly's compaction warnings
        # Per session: the last assembly's stable prefix, to record.
        self.prefixes = Prefixes(SESSIONS)

    def close(self) -> None:
        POOL.withdraw(self.target, self.ledger)
        self.ledger.close()

    def __enter__(self) -> LedgerSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self, session: str) -> None:
        """Create ``session`` in the ledger if it is new (a missing session is an error)."""
        self.ledger.create_session(session)

    # -- summarizer ----------------------------------------------------------------------

    def summarizer(self) -> Summarizer:
        """The summarizer ``[plugins.ledger] summarizer`` names (from ``lamina_summarizers``)."""
        name = self.settings.summarizer
        try:
            return self.assembler.summarizer(name)
        except ConfigError as exc:
            if name == DEFAULT_SUMMARIZER:  # the plugin itself is not registered
                return default_summarizer()
            raise ConfigError(
                str(exc).split(": ", 1)[-1],
                file=self.assembler.config.path,
                key=f"plugins.{self.plugin}.summarizer",
            ) from exc

    # -- assembly ------------------------------------------------------------------------

    def assemble(self, request: AssemblyRequest) -> AssembledContext:
        with self._locks.hold(request.session_label):
            self._assembled[request.session_label] = (request, self.assembler.clock())
            self._noted.warnings = []
            # The history is read once here, for the session's sums and the kernel's
            # provider alike (read again only after a write: see lamina_ledger.vouch).
            with vouched(self.target, self.ledger, request.session_label, request.parent_turn_id):
                return self._reported(self._assemble(request))

    def _assemble(self, request: AssemblyRequest) -> AssembledContext:
        """Assemble; when compaction is due (see ``lamina_ledger.trigger``: the history would
        not fit whole, or takes more than ``compact_when``), compact to ``compact_target`` of
        the available tokens (trigger ``context_limit``) first.

        The kernel runs once per request, compaction or not: what the previous request of the
        session showed (its available tokens and the tokens outside history) and the ledger's
        exact counts say beforehand whether compaction is due. Only when that guess is
        missing (the session's first request here), wrong, or cannot be made (the kernel
        edited tool results last time, or stubs them: the ledger's counts are of whole
        results) does the kernel run again."""
        seen = self._seen.get(budget_key(request))
        compacted = False
        stubbing = self.assembler.config.tool_results.stub_after > 0
        if seen is not None and not seen[3] and not stubbing:
            available, base, history = seen[0], seen[1] - seen[2], self._history_tokens(request)
            # A bound on the event's tokens first (the kernel counts it anyway): counted
            # here only when the bound leaves the answer open.
            over = history > history_limit(self.settings, available, base + event_bound(request))
            fixed = base + self._event_tokens(request) if over else 0
            over = over and history > history_limit(self.settings, available, fixed)
            if over and not self._holds_capped(request, available):
                result = self._compact(
                    request, self.settings.compact_target, available, fixed, "context_limit"
                )
                request, compacted = continued(request, result), result is not None
        measured = self._measure(request)
        if isinstance(measured, AssembledContext):
            return measured
        if not compacted:
            result = self._compact(
                request, self.settings.compact_target, *measured[:2], "context_limit"
            )
            request = continued(request, result)
            measured = self._measure(request)
            if isinstance(measured, AssembledContext):
                return measured
        if measured[2] is not None:  # it fits, only over compact_when: compacting harder
            return measured[2]  # would not bring it under (the newest turns are kept)
        # Still too big (the summary or the kept turns came out larger): compact harder once.
        result = self._compact(
            request, self.settings.recovery_target, *measured[:2], "context_limit"
        )
        return self._kernel(continued(request, result))

    def recover(
        self, request: AssemblyRequest, failed: AssembledContext | None = None
    ) -> AssembledContext:
        """After the provider reported a context overflow (for ``failed``, the context that
        was sent, when given): compact to ``recovery_target`` (trigger ``overflow_recovery``)
        and assemble again."""
        with self._locks.hold(request.session_label):
            self._noted.warnings = []
            available, fixed = self._budget(request, failed)
            result = self._compact(
                request, self.settings.recovery_target, available, fixed, "overflow_recovery"
            )
            return self._reported(self._observed(request, self._kernel(continued(request, result))))

    def run(
        self,
        request: AssemblyRequest,
        send: Callable[[AssembledContext], R],
        *,
        is_overflow: Callable[[BaseException], bool] | None = None,
    ) -> tuple[AssembledContext, R]:
        """Assemble (proactively compacted) and ``send``; if ``send`` raises an error that
        ``is_overflow`` (default: the context's provider adapter) calls a context overflow,
        recover and send once more. Any other error, or a second failure, propagates."""
        ctx = self.assemble(request)
        try:
            return ctx, send(ctx)
        except Exception as exc:
            check = is_overflow or self._adapter_check(ctx)
            if not check(exc):
                raise
        ctx = self.recover(request, ctx)
        return ctx, send(ctx)

    def compact(
        self,
        request: AssemblyRequest,
        *,
        share: float | None = None,
        trigger: Trigger = "manual",
        instructions: str | None = None,
    ) -> CompactionResult | None:
        """Compact now so the request would use at most ``share`` (default ``compact_target``)
        of the available tokens; ``instructions`` (what the summary should keep) go to the
        summarizer when it takes them, else the result's ``warnings`` say so. ``None`` when
        there was nothing to summarize."""
        with self._locks.hold(request.session_label):
            available, fixed = self._budget(request, None)
            share = share or self.settings.compact_target
            return self._compact(request, share, available, fixed, trigger, instructions)

    # -- recording -----------------------------------------------------------------------

    def record_turn(
        self,
        request: AssemblyRequest | AssembledContext,
        messages: Sequence[Message],
        *,
        usage: Usage | None = None,
        message_tokens: Sequence[int | None] | None = None,
        **fields: Any,
    ) -> str:
        """Append a finished turn with its exact per-message token counts (the model's own
        tokenizer) and the provider's usage. Returns the turn id.

        Counts are not made twice: ``message_tokens[i]`` (when given, not ``None``) is used as
        the model's tokenizer's count of message ``i``, and a text the assembler already
        counted (the current message, a retried turn) is taken from its memo. The first user
        message gets the event's ``context_json`` (platform, hook count, attachments,
        ``injectedAt``) unless it carries its own."""
        model = request.model
        tokenizer = self._tokenizer(model)
        if message_tokens is not None and len(message_tokens) != len(messages):
            raise LedgerError(
                f"{len(message_tokens)} message token counts for {len(messages)} messages",
                session=request.session_label,
            )
        context = user_context(
            request, self._assembled.get(request.session_label), self.assembler.clock
        )
        messages = with_user_context(messages, context)
        exact = tokenizer.exact
        counts = message_counts(messages, tokenizer, message_tokens) if exact else None
        provider = request.provider or None
        if "prefix" not in fields:  # the request's stable prefix, to find cache busts by
            fields["prefix"] = self.prefixes.take(request, messages)
        turn_id = self.ledger.append_turn(
            request.session_label,
            messages,
            usage=usage,
            model=model,
            provider=fields.pop("provider", provider),
            total_tokens=sum(counts) if counts is not None else None,
            message_tokens=counts,
            counted_by=tokenizer.name if exact else None,
            **fields,
        )
        if counts is not None:  # sized now, from the counts at hand: not at the next request
            overhead = self.assembler.model(model).info.message_overhead
            self._sizes.written(turn_id, messages, counts, tokenizer, overhead)
        return turn_id

    # -- internals -----------------------------------------------------------------------

    def _observed(self, request: AssemblyRequest, ctx: AssembledContext) -> AssembledContext:
        """Remember what ``ctx`` showed of the budget for the session's next request."""
        budget = ctx.token_budget
        fixed = budget.used.total - budget.used.history
        events = self._event_tokens(request)
        stubs = self.assembler.config.tool_results.stub_after > 0
        self._seen[budget_key(request)] = (
            budget.available,
            fixed,
            events,
            edited(ctx, stubs=stubs),
        )
        return ctx

    def _budget(self, request: AssemblyRequest, ctx: AssembledContext | None) -> tuple[int, int]:
        """(available tokens, tokens outside history): from ``ctx``, else what the session's
        previous request showed, else from running the kernel."""
        if ctx is not None:
            used = ctx.token_budget.used
            return ctx.token_budget.available, used.total - used.history
        seen = self._seen.get(budget_key(request))
        if seen is not None:
            return seen[0], seen[1] - seen[2] + self._event_tokens(request)
        measured = self._measure(request)
        if isinstance(measured, AssembledContext):
            return self._budget(request, measured)
        return measured[:2]

    def _measure(self, request: AssemblyRequest) -> AssembledContext | Measured:
        """The context when it fits whole and no compaction is due; else what compacting
        needs (``Measured``)."""
        try:
            ctx = self._observed(request, self._kernel(request))
        except BudgetError as exc:
            hist = self._history_tokens(request)
            fixed = max(0, exc.available + exc.overage - hist)
            events = self._event_tokens(request)
            self._seen[budget_key(request)] = (exc.available, fixed, events, False)
            return exc.available, fixed, None
        whole = fits(ctx)
        if whole and not due(ctx, self.settings):
            return ctx
        used = ctx.token_budget.used
        return ctx.token_budget.available, used.total - used.history, ctx if whole else None

    def _compact(
        self,
        request: AssemblyRequest,
        share: float,
        available: int,
        fixed: int,
        trigger: Trigger,
        instructions: str | None = None,
    ) -> CompactionResult | None:
        resolved = self.assembler.model(request.model)
        history = self.ledger.history(request.session_label, at_turn=request.parent_turn_id)
        budget = max(0, int(share * available) - fixed)
        result = compact_history(
            self.ledger,
            history,
            history_budget=budget,
            settings=self.settings,
            summarizer=self.summarizer(),
            tokenizer=self._tokenizer(request.model),
            overhead=resolved.info.message_overhead,
            trigger=trigger,
            plugin=self.plugin,
            pinned=request.parent_turn_id is not None,
            instructions=instructions,
        )
        if result is not None:
            self.compactions.append(result)
            getattr(self._noted, "warnings", []).extend(result.warnings)  # for the report
        elif trigger == "overflow_recovery":
            raise LedgerError(
                f"context overflow but nothing left to compact (the newest "
                f"{self.settings.minimum_turns} turns are always kept)",
                session=request.session_label,
                turn=history.head_turn_id,
            )
        return result

    def _reported(self, ctx: AssembledContext) -> AssembledContext:
        """``ctx`` with the warnings of the compactions made for it in its report (and its
        stable prefix remembered for the turn ``record_turn`` records next)."""
        assembled = self._assembled.get(ctx.session_label)
        self.prefixes.keep(ctx, None if assembled is None else assembled[0].event)
        noted, self._noted.warnings = getattr(self._noted, "warnings", []), []
        if not noted:
            return ctx
        warnings = (*ctx.report.warnings, *(f"plugin {self.plugin!r}: {w}" for w in noted))
        return evolve(ctx, report=evolve(ctx.report, warnings=warnings))

    def _adapter_check(self, ctx: AssembledContext) -> Callable[[BaseException], bool]:
        try:
            adapter = self.assembler.adapter(ctx.provider)
        except ConfigError:
            return lambda _exc: False
        return adapter.is_context_overflow

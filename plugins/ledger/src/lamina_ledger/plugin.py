"""The ``ledger`` plugin's hooks: its settings, the session-layer provider, the extractive
summarizer and the ``lamina ledger`` commands. Without a ``database`` it yields nothing."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from lamina import Block, LayerProvider, ProviderContext, SessionStore, Summarizer, hookimpl
from lamina_ledger.errors import LedgerError
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import summarizer

if TYPE_CHECKING:
    from lamina_ledger.store import LedgerStore

# The ledger itself (pool, reader, blocks) loads when a provider first reads a session, the
# session store (with asyncio and compaction) when ``lamina serve`` first calls it: a start
# that never does, or a config without a ``database``, pays for neither.


#: Per settings, config and plugin name: the database and the block makers, made once (a
#: request would otherwise resolve the path and build the makers again).
_RESOLVED: dict[tuple[int, int, str], tuple[LedgerSettings, object, str, dict[str, Any]]] = {}


def _source(ctx: ProviderContext) -> tuple[LedgerSettings, str, dict[str, Any]] | None:
    """The settings, database and block makers (``_makers``) this request's history comes
    from, or ``None`` when it has none: no ``database`` configured, or a worker without
    ``worker_history``."""
    settings: LedgerSettings | None = ctx.settings
    if settings is None or settings.database is None:
        return None
    if ctx.request.role == "worker" and settings.worker_history == "none":
        return None
    key = (id(settings), id(ctx.config), ctx.plugin)
    found = _RESOLVED.get(key)
    if found is None or found[0] is not settings or found[1] is not ctx.config:
        target = settings.target(ctx.config)
        assert target is not None
        found = (settings, ctx.config, target, _makers(settings, ctx.plugin))
        if len(_RESOLVED) >= 64:
            _RESOLVED.clear()
        _RESOLVED[key] = found
    return settings, found[2], found[3]


def from_memory(ctx: ProviderContext) -> Sequence[Block] | None:
    """``provide`` 's blocks when a ``LedgerSession`` on this thread has just read the
    session's history (``lamina_ledger.vouch``); else ``None``: ``provide`` reads."""
    source = _source(ctx)
    if source is None:
        return []
    _, target, makers = source
    return _remembered()(target, ctx.request.session_label, ctx.request.parent_turn_id, **makers)


@functools.cache
def _remembered() -> Callable[..., Sequence[Block] | None]:
    """``lamina_ledger.vouch.remembered``, imported once: an import statement run on every
    request would look for the module's ``__path__`` each time, which raises (and formats)
    an ``AttributeError`` inside the interpreter."""
    from lamina_ledger.vouch import remembered

    return remembered


def _makers(settings: LedgerSettings, plugin: str) -> dict[str, Any]:
    """How the provider makes its blocks: the summary's (with what it depends on besides the
    compaction) and each turn's."""
    from lamina_ledger.blocks import summary_block, summary_key, turn_blocks

    return {
        "plugin": plugin,
        "summary": (summary_key(settings), lambda h: summary_block(h, settings, plugin)),
        "make": lambda turn: turn_blocks(turn, plugin),
    }


def provide(ctx: ProviderContext) -> Sequence[Block]:
    """The session's history from the ledger (summary, kept turns) as ``session`` blocks,
    read through a ledger kept open between requests (only what changed is read)."""
    source = _source(ctx)
    if source is None:
        return []
    settings, target, makers = source
    from lamina_ledger.db import db_errors, is_postgres
    from lamina_ledger.pool import POOL

    session = ctx.request.session_label
    lenient = settings.missing_session == "empty"
    local = not is_postgres(target) and not target.startswith("file:")
    if lenient and local and not os.path.exists(target):
        return []
    try:
        ledger = POOL.get(
            target, busy_timeout=settings.busy_timeout, connect_timeout=settings.connect_timeout
        )
    except LedgerError as exc:
        raise LedgerError(exc.cause, session=session, database=exc.database) from exc
    try:
        return ledger.history_blocks(session, at_turn=ctx.request.parent_turn_id, **makers)
    except LedgerError as exc:
        if lenient and exc.cause == "no such session":
            return []
        if isinstance(exc.__cause__, db_errors()):  # the connection failed: open anew next time
            POOL.discard(target, ledger)
        raise


@hookimpl
def lamina_settings_class() -> type:
    return LedgerSettings


@hookimpl
def lamina_layer_providers(settings: LedgerSettings | None) -> Iterable[LayerProvider]:
    active = settings is not None and settings.database is not None
    return [
        LayerProvider(
            name="ledger-history",
            provide=provide,
            from_memory=from_memory,
            layers=("session",),
            required=active,
            description="session history from the Agents Ledger (latest compaction + kept turns)",
        )
    ]


@hookimpl
def lamina_summarizers() -> Iterable[Summarizer]:
    return [summarizer()]


@hookimpl
def lamina_commands(cli: Any) -> None:
    from lamina_ledger.cli import ledger_group

    cli.add_command(ledger_group)


@hookimpl
def lamina_session_stores(settings: LedgerSettings | None) -> Iterable[SessionStore]:
    """The ledger as the session store of ``lamina serve`` (none without a ``database``)."""
    if settings is None or settings.database is None:
        return []
    return [_DeferredStore(settings).record()]


class _DeferredStore:
    """The ``ledger`` session store (``lamina_ledger.store``), made on its first call."""

    def __init__(self, settings: LedgerSettings) -> None:
        self.settings = settings
        self.store: LedgerStore | None = None
        self.lock = threading.Lock()

    def get(self) -> LedgerStore:
        with self.lock:
            if self.store is None:
                from lamina_ledger.store import LedgerStore

                self.store = LedgerStore(self.settings)
            return self.store

    def forward(self, name: str) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            return getattr(self.get(), name)(*args)

        call.__name__ = call.__qualname__ = name
        return call

    def aassemble(self, *args: Any) -> Awaitable[Any]:
        return self.get().aassemble(*args)

    def close(self, assembler: Any) -> None:
        if self.store is not None:  # never made: nothing was opened
            self.store.close(assembler)

    def record(self) -> SessionStore:
        return SessionStore(
            name="ledger",
            assemble=self.forward("assemble"),
            aassemble=self.aassemble,
            record=self.forward("record"),
            compact=self.forward("compact"),
            stats=self.forward("stats"),
            close=self.close,
            turn_stats=self.forward("turn_stats"),
            stats_page=self.forward("stats_page"),
            description="sessions in the Agents Ledger: proactive compaction, turns with usage",
        )

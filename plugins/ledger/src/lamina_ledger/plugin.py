"""The ``ledger`` plugin's hooks: its settings, the session-layer provider, the extractive
summarizer and the ``lamina ledger`` commands. Without a ``database`` it yields nothing."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lamina import Block, LayerProvider, ProviderContext, SessionStore, Summarizer, hookimpl
from lamina_ledger.blocks import summary_block, summary_key, turn_blocks
from lamina_ledger.db import db_errors, is_postgres
from lamina_ledger.errors import LedgerError
from lamina_ledger.pool import POOL
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import summarizer


def provide(ctx: ProviderContext) -> list[Block]:
    """The session's history from the ledger (summary, kept turns) as ``session`` blocks,
    read through a ledger kept open between requests (only what changed is read)."""
    settings: LedgerSettings | None = ctx.settings
    if settings is None or settings.database is None:
        return []
    if ctx.request.role == "worker" and settings.worker_history == "none":
        return []
    target = settings.target(ctx.config)
    assert target is not None
    session = ctx.request.session_label
    lenient = settings.missing_session == "empty"
    local = not is_postgres(target) and not target.startswith("file:")
    if lenient and local and not Path(target).exists():
        return []
    try:
        ledger = POOL.get(
            target, busy_timeout=settings.busy_timeout, connect_timeout=settings.connect_timeout
        )
    except LedgerError as exc:
        raise LedgerError(exc.cause, session=session, database=exc.database) from exc
    try:
        return ledger.history_blocks(
            session,
            at_turn=ctx.request.parent_turn_id,
            plugin=ctx.plugin,
            summary=(summary_key(settings), lambda h: summary_block(h, settings, ctx.plugin)),
            make=lambda turn: turn_blocks(turn, ctx.plugin),
        )
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
    from lamina_ledger.store import session_store

    if settings is None or settings.database is None:
        return []
    return [session_store(settings)]

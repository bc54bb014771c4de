"""When a ``LedgerSession`` compacts before assembling.

By default when the history would not fit whole: the kernel would have to cut ledger blocks.
With ``[plugins.ledger] compact_when`` (a share of the available tokens), also as soon as the
history takes more than that share. Tool results the kernel stubbed or capped
(``[tool_results]``) are not cuts: the ledger keeps them whole and the kernel edits them
the same way every turn."""

from __future__ import annotations

from lamina import (
    SESSION,
    AssembledContext,
    LaminaConfig,
    Tokenizer,
    ToolCallPart,
    ToolResultPart,
)
from lamina_ledger.blocks import PREFIX, message_tokens
from lamina_ledger.compaction import message_size
from lamina_ledger.records import History
from lamina_ledger.settings import LedgerSettings

#: Report strategies of the kernel's edits of tool calls and results (``[tool_results]``).
EDITS = frozenset({"tool_result_cap", "tool_result_stub", "tool_call_cap"})


def fits(ctx: AssembledContext) -> bool:
    """Whether the kernel kept every ledger block (whole, or with its tool results edited):
    no history was cut this request."""
    report = ctx.report
    layers = [r for r in report.layers if r.layer == SESSION]
    if layers and all(r.kept == r.blocks and r.tokens == r.original_tokens for r in layers):
        return True  # every session block kept whole: no need to look at each
    for gone in report.dropped:  # dropped blocks are listed one by one only when verbose
        if gone.layer == SESSION and PREFIX in (
            gone.first_id[: len(PREFIX)],
            gone.last_id[: len(PREFIX)],
        ):
            return False
    return all(
        b.status == "kept" or (b.status == "truncated" and b.strategy in EDITS)
        for b in ctx.report.blocks
        if b.id.startswith(PREFIX)
    )


def edited(ctx: AssembledContext, *, stubs: bool = True) -> bool:
    """Whether the kernel stubbed or capped a tool result or call of the history in ``ctx``.
    Without stubs (``[tool_results] stub_after`` 0) only a cap can have, and a cap always
    leaves fewer tokens than it found: history kept at its original size was not edited,
    which the layer totals say without looking at each block."""
    layers = [r for r in ctx.report.layers if r.layer == SESSION]
    if not stubs and all(r.tokens == r.original_tokens for r in layers):
        return False
    return any(b.strategy in EDITS for b in ctx.report.blocks if b.id.startswith(PREFIX))


def history_limit(settings: LedgerSettings, available: int, fixed: int) -> int:
    """The most tokens history may take before compacting, with ``fixed`` tokens of the
    ``available`` taken by the rest of the request."""
    room = available - fixed
    if settings.compact_when is None:
        return room
    return min(room, int(settings.compact_when * available))


def due(ctx: AssembledContext, settings: LedgerSettings) -> bool:
    """Whether ``ctx`` (which fits) takes more of its budget for history than
    ``compact_when`` allows."""
    if settings.compact_when is None:
        return False
    budget = ctx.token_budget
    return budget.used.history > int(settings.compact_when * budget.available)


def holds_capped(
    history: History, tokenizer: Tokenizer, config: LaminaConfig, available: int
) -> bool:
    """Whether a tool result or call in ``history`` is over the kernel's smallest cap
    (``[tool_results]``) for a budget of ``available`` tokens: the ledger's whole counts then
    overstate what the kernel sends, and only the kernel can say whether the history fits."""
    caps = config.tool_results
    cap = caps.max_tokens or max(1, int(caps.share * available))
    floor = min([cap, *caps.per_tool.values()])
    for turn in history.turns:
        exact = message_tokens(turn, tokenizer.name)
        for message, tokens in zip(turn.messages, exact, strict=True):
            if not any(isinstance(p, (ToolResultPart, ToolCallPart)) for p in message.content):
                continue
            if (tokens if tokens is not None else message_size(message, tokenizer)) > floor:
                return True
    return False

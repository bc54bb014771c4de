"""Compaction: replace the oldest turns with a summary by appending a compaction turn.

The cut is placed so the kept turns fill the target (keeping as much verbatim as fits), never
inside a tool call/result pair and never into the newest ``minimum_turns`` turns. Nothing
existing is edited or deleted; the summary and the new first-kept turn are a new row."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from attrs import frozen

from lamina import (
    Block,
    Message,
    Summarizer,
    Tokenizer,
    ToolCallPart,
    ToolResultPart,
    count_ids,
    count_parts,
)
from lamina_ledger.blocks import message_tokens, summary_block, summary_text, turn_blocks
from lamina_ledger.errors import LedgerConflict
from lamina_ledger.ledger import Ledger
from lamina_ledger.records import History, Trigger, Turn
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import NAME as EXTRACTIVE
from lamina_ledger.summarizer import summarizer as extractive

LOG = logging.getLogger("lamina.ledger")
#: The least a summary is given, however small the budget.
MIN_SUMMARY_TOKENS = 64
#: How often a compaction is made again after the session moved to another branch meanwhile.
ATTEMPTS = 3


@frozen(kw_only=True)
class CompactionResult:
    """What one compaction did."""

    turn_id: str
    first_kept_turn_id: str | None
    summarized_turns: int
    kept_turns: int
    tokens_before: int
    tokens_after: int
    trigger: Trigger
    #: The summarizer that wrote the summary (the extractive one when the configured failed).
    summarizer: str = EXTRACTIVE
    #: What went wrong on the way, for the host's report (a summarizer that failed, say).
    warnings: tuple[str, ...] = ()


def message_size(message: Message, tokenizer: Tokenizer) -> int:
    """Tokens of a message's parts, by the kernel's rules (``lamina.count_parts``)."""
    return count_parts(message.content, tokenizer.count)


def turn_size(turn: Turn, tokenizer: Tokenizer, overhead: int) -> int:
    """A turn's tokens in history as the kernel charges them: the ledger's exact counts
    where this tokenizer made them, and each message's framing (overhead and tool ids)."""
    return messages_size(turn.messages, message_tokens(turn, tokenizer.name), tokenizer, overhead)


def messages_size(
    messages: Sequence[Message],
    exact: Sequence[int | None],
    tokenizer: Tokenizer,
    overhead: int,
) -> int:
    """Messages' tokens in history: ``exact[i]`` (counted where ``None``) and each message's
    framing (overhead and tool ids)."""
    return sum(
        (t if t is not None else message_size(m, tokenizer))
        + overhead
        + count_ids(m.content, tokenizer.count)
        for m, t in zip(messages, exact, strict=True)
    )


def valid_cuts(turns: Sequence[Turn]) -> list[bool]:
    """``ok[k]``: keeping ``turns[k:]`` orphans no tool result (its call is not cut away)."""
    call_turn: dict[str, int] = {}
    for i, t in enumerate(turns):
        for m in t.messages:
            for p in m.content:
                if isinstance(p, ToolCallPart):
                    call_turn.setdefault(p.id, i)
    ok = [True] * (len(turns) + 1)
    for j, t in enumerate(turns):
        for m in t.messages:
            for p in m.content:
                if isinstance(p, ToolResultPart) and p.call_id in call_turn:
                    i = call_turn[p.call_id]
                    for k in range(i + 1, j + 1):  # a cut between the call and its result
                        ok[k] = False
    return ok


def choose_cut(
    sizes: Sequence[int], ok: Sequence[bool], budget: int, minimum_turns: int
) -> int | None:
    """Index of the first kept turn: the smallest valid one whose suffix fits ``budget``
    (else the largest valid one allowed). ``None`` when no turn may be summarized."""
    n = len(sizes)
    last = n - min(minimum_turns, n)
    candidates = [k for k in range(1, last + 1) if ok[k]]
    if not candidates:
        return None
    suffix = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + sizes[i]
    for k in candidates:
        if suffix[k] <= budget:
            return k
    return candidates[-1]


def compact_history(
    ledger: Ledger,
    history: History,
    *,
    history_budget: int,
    settings: LedgerSettings,
    summarizer: Summarizer,
    tokenizer: Tokenizer,
    overhead: int = 0,
    trigger: Trigger = "manual",
    plugin: str = "ledger",
    pinned: bool = False,
    instructions: str | None = None,
) -> CompactionResult | None:
    """Summarize the oldest turns of ``history`` so the rest fits ``history_budget`` tokens
    (summary included) and append the compaction. ``None``: nothing could be summarized.

    The compaction goes on top of the session's head when it is written (turns appended since
    ``history`` was read are kept after it); when the head moved to another branch meanwhile,
    the history is read again and the compaction made again. ``pinned``: ``history`` was read
    at a chosen turn (a branch), and the compaction goes right after that turn.
    ``instructions`` go to a summarizer that takes them (see ``summarize``)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _compact_once(
                ledger,
                history,
                _Plan(
                    history_budget=history_budget,
                    settings=settings,
                    summarizer=summarizer,
                    tokenizer=tokenizer,
                    overhead=overhead,
                    trigger=trigger,
                    plugin=plugin,
                    instructions=instructions,
                ),
                pinned=pinned,
            )
        except LedgerConflict:
            if attempt == ATTEMPTS:
                raise
            history = ledger.history(history.session)
    raise AssertionError("unreachable")


@frozen(kw_only=True)
class _Plan:
    """What a compaction is asked to do, whatever history it is made from."""

    history_budget: int
    settings: LedgerSettings
    summarizer: Summarizer
    tokenizer: Tokenizer
    overhead: int
    trigger: Trigger
    plugin: str
    instructions: str | None = None


def summarize(
    summarizer: Summarizer,
    blocks: Sequence[Block],
    allowance: int,
    tokenizer: Tokenizer,
    instructions: str | None = None,
) -> tuple[str, str, tuple[str, ...]]:
    """(summary, name of the summarizer that wrote it, warnings). A summarizer that raises or
    returns nothing (an LLM that could not be reached, an empty reply) is replaced by the
    extractive one, with a warning; instructions a summarizer does not take are a warning."""
    warnings: list[str] = []
    if instructions is not None and not summarizer.takes_instructions:
        warnings.append(
            f"summarizer {summarizer.name!r} takes no instructions; compacted without them"
        )
    if summarizer.name == EXTRACTIVE:
        return summarizer.run(blocks, allowance, tokenizer), summarizer.name, tuple(warnings)
    try:
        text = summarizer.run(blocks, allowance, tokenizer, instructions=instructions)
        if text.strip():
            return text, summarizer.name, tuple(warnings)
        reason = "it returned an empty summary"
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    warnings.append(
        f"summarizer {summarizer.name!r} failed ({reason}); compacted with the extractive "
        f"summary ({EXTRACTIVE!r}) instead"
    )
    LOG.warning("%s", warnings[-1])
    return extractive().run(blocks, allowance, tokenizer), EXTRACTIVE, tuple(warnings)


def _compact_once(
    ledger: Ledger, history: History, plan: _Plan, *, pinned: bool
) -> CompactionResult | None:
    settings, tokenizer, overhead = plan.settings, plan.tokenizer, plan.overhead
    turns = list(history.turns)
    sizes = [turn_size(t, tokenizer, overhead) for t in turns]
    allowance = max(MIN_SUMMARY_TOKENS, min(settings.summary_tokens, plan.history_budget // 4))
    previous = summary_block(history, settings, plan.plugin)
    previous_tokens = tokenizer.count(previous.body) + overhead if previous is not None else 0
    k = choose_cut(
        sizes,
        valid_cuts(turns),
        max(0, plan.history_budget - allowance - overhead),
        settings.minimum_turns,
    )
    if k is None:
        return None
    blocks: list[Block] = [previous] if previous is not None else []
    for t in turns[:k]:
        blocks += turn_blocks(t, plan.plugin)
    summary, made_by, warnings = summarize(
        plan.summarizer, blocks, allowance, tokenizer, plan.instructions
    )
    after = tokenizer.count(summary_text(summary, settings)) + overhead + sum(sizes[k:])
    before = previous_tokens + sum(sizes)
    first_kept = turns[k].id if k < len(turns) else None
    turn_id = ledger.record_compaction(
        history.session,
        summary,
        first_kept,
        tokens_before=before,
        tokens_after=after,
        trigger=plan.trigger,
        summarizer=made_by,
        parent_turn_id=history.head_turn_id if pinned else None,
        expected_head=None if pinned else history.head_turn_id,
    )
    return CompactionResult(
        turn_id=turn_id,
        first_kept_turn_id=first_kept,
        summarized_turns=k,
        kept_turns=len(turns) - k,
        tokens_before=before,
        tokens_after=after,
        trigger=plan.trigger,
        summarizer=made_by,
        warnings=warnings,
    )

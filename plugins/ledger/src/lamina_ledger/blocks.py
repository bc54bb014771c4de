"""A ledger history as ``session``-layer blocks: one block per message, ``group`` = turn id
(so a tool call and its result are kept or dropped together), exact token counts attached
with the name of the tokenizer that made them."""

from __future__ import annotations

from typing import Any

from lamina import SESSION, Block, Message, Provenance, count_parts
from lamina_ledger.records import History, Turn
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.summarizer import SUMMARY_KEY

PREFIX = "ledger:"


def _weight(message: Message) -> int:
    """A message's size in characters, by the kernel's rules for its parts."""
    return max(count_parts(message.content, len), 1)


def message_tokens(turn: Turn, tokenizer: str | None = None) -> list[int | None]:
    """Exact tokens per message: stored per message, else the turn's ``total_tokens`` split
    in proportion to size (the turn's sum stays exact), else unknown (``None``). With
    ``tokenizer``, counts another tokenizer made are unknown too."""
    if tokenizer is not None and turn.counted_by != tokenizer:
        return [None] * len(turn.messages)
    stored = list(turn.message_tokens)
    if stored and all(t is not None for t in stored):
        return stored
    if turn.total_tokens is None or not turn.messages:
        return [None] * len(turn.messages)
    weights = [_weight(m) for m in turn.messages]
    total, whole = sum(weights), turn.total_tokens
    shares = [whole * w // total for w in weights]
    shares[-1] += whole - sum(shares)
    return list(shares)


def summary_text(summary: str, settings: LedgerSettings) -> str:
    return f"{settings.summary_marker}\n{summary}" if settings.summary_marker else summary


def summary_block(history: History, settings: LedgerSettings, plugin: str) -> Block | None:
    c = history.compaction
    if c is None:
        return None
    return Block.text(
        f"{PREFIX}{c.turn_id}:summary",
        SESSION,
        summary_text(c.summary, settings),
        role=settings.summary_role,
        group=c.turn_id,
        priority=0.9,
        provenance=Provenance(
            plugin=plugin,
            source_id=c.turn_id,
            metadata={SUMMARY_KEY: True, "turn_id": c.turn_id, "summary": c.summary},
        ),
    )


def turn_blocks(turn: Turn, plugin: str) -> list[Block]:
    """One block per message; the content hash is the one stored with it (never recomputed)."""
    out = []
    hashes = turn.message_hashes or (None,) * len(turn.messages)
    for i, (m, tokens, digest) in enumerate(
        zip(turn.messages, message_tokens(turn), hashes, strict=True)
    ):
        extra: dict[str, Any] = {} if digest is None else {"hash": digest}
        out.append(
            Block(
                id=f"{PREFIX}{turn.id}:{i}",
                layer=SESSION,
                content=m.content,
                role=m.role,
                group=turn.id,
                token_count=tokens,
                counted_by=turn.counted_by if tokens is not None else None,
                provenance=Provenance(
                    plugin=plugin,
                    source_id=f"{turn.id}:{i}",
                    metadata={"turn_id": turn.id, "context_json": m.context_json},
                ),
                **extra,
            )
        )
    return out


def summary_key(settings: LedgerSettings) -> str:
    """What the summary block depends on besides the compaction (for remembering it)."""
    return f"{settings.summary_role}\x00{settings.summary_marker}"


def history_blocks(history: History, settings: LedgerSettings, plugin: str) -> list[Block]:
    """The whole history as blocks, oldest first: the summary (if any), then the kept turns."""
    first = summary_block(history, settings, plugin)
    out = [first] if first is not None else []
    for turn in history.turns:
        out += turn_blocks(turn, plugin)
    return out

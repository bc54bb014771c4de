"""What the ledger hands back: turns with their messages, compactions, histories, statistics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from attrs import frozen

from lamina import Message, Usage

TurnType = Literal["normal", "compaction"]
Trigger = Literal["context_limit", "overflow_recovery", "manual"]
TRIGGERS: tuple[Trigger, ...] = ("context_limit", "overflow_recovery", "manual")


@frozen(kw_only=True)
class Turn:
    """One turn as stored: its messages, its place in the ancestry and the provider's usage.

    ``total_tokens`` is the exact size of the turn's messages in history (what assembly uses
    instead of tokenizing) as ``counted_by`` (a tokenizer's name) counts them; ``usage`` is what
    the provider reported for the request that made it.
    """

    id: str
    type: TurnType
    parent_id: str | None
    thread_id: str
    messages: tuple[Message, ...] = ()
    message_tokens: tuple[int | None, ...] = ()
    #: Each message's content hash (``codec.parts_hash``), stored when written.
    message_hashes: tuple[str, ...] = ()
    model: str | None = None
    provider: str | None = None
    total_tokens: int | None = None
    counted_by: str | None = None
    usage: Usage | None = None
    started_at: str = ""
    completed_at: str | None = None


@frozen(kw_only=True)
class Compaction:
    """A compaction: the summary that replaces every turn before ``first_kept_turn_id``."""

    turn_id: str
    summary: str
    first_kept_turn_id: str | None
    tokens_before: int | None
    tokens_after: int | None
    trigger: Trigger
    summarizer: str | None
    created_at: str


@frozen(kw_only=True)
class History:
    """A session's history as assembly sees it: the latest compaction (if any) and the turns
    kept verbatim after it, oldest first (compaction turns themselves are not listed).
    ``turns`` is immutable: a tuple, or a ``Chunked`` that the history with the next turns
    appended shares (equal to the tuple of the same turns)."""

    session: str
    head_turn_id: str | None
    compaction: Compaction | None
    turns: Sequence[Turn]


@frozen(kw_only=True)
class Stats:
    """Totals over a session's ancestry: is the provider's prompt cache hitting?"""

    session: str
    turns: int
    compactions: int
    input_tokens: int
    cached_input_tokens: int
    cache_creation_tokens: int
    output_tokens: int
    turns_with_usage: int
    #: What the priced turns cost (US dollars at models.dev's prices; ``None``: none priced).
    cost: float | None = None
    priced_turns: int = 0
    #: Turns whose stable prefix did not extend the previous turn's, without a compaction.
    cache_busts: int = 0

    @property
    def cache_hit_ratio(self) -> float | None:
        """Cached input over all input tokens (``None`` when no usage was recorded)."""
        return self.cached_input_tokens / self.input_tokens if self.input_tokens else None

"""Sizes a ``LedgerSession`` works with, counted once: through the assembler's memo (a text
the kernel or an earlier call counted is not tokenized again) and per turn (a turn's size in
history never changes)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from lamina import Message, Tokenizer
from lamina_ledger.blocks import summary_text
from lamina_ledger.compaction import message_size, messages_size, turn_size
from lamina_ledger.recent import SESSIONS, Recent
from lamina_ledger.records import History, Turn
from lamina_ledger.settings import LedgerSettings

#: Turn sizes remembered before the memory is started afresh.
_TURNS = 200_000


class Sizes:
    """Each turn's size in history by tokenizer and per-message framing, remembered; and each
    session's last total, so a history that only grew is summed over its new turns."""

    def __init__(self, sessions: int = SESSIONS) -> None:
        self._turns: dict[tuple[str, str, int], int] = {}
        # Per session (and tokenizer, framing): the last total, for the most recent sessions.
        self._last: Recent[tuple[str, str, int], tuple[str | None, int, str, int]]
        self._last = Recent(sessions)
        # Per session, tokenizer, framing, compaction and summary marker: the summary's tokens.
        self._summaries: dict[tuple[str, str, int, str, str, int, str | None], int] = {}
        self._lock = threading.Lock()

    def history(
        self, history: History, tokenizer: Tokenizer, overhead: int, settings: LedgerSettings
    ) -> int:
        """The tokens the history's blocks take (summary included), framing included."""
        turns = history.turns
        summary = 0
        compaction = history.compaction
        key = (history.session, tokenizer.name, overhead)
        if compaction is not None:
            # A compaction's summary never changes: counted once per marker (the text is
            # otherwise made and hashed again on every request). Its time and length are in
            # the key too, for a ledger made again with ids a caller chose.
            marked = (
                *key,
                compaction.turn_id,
                compaction.created_at,
                len(compaction.summary),
                settings.summary_marker,
            )
            found = self._summaries.get(marked)
            if found is None:
                text = summary_text(compaction.summary, settings)
                found = tokenizer.count(text) + overhead
                with self._lock:
                    if len(self._summaries) >= SESSIONS:
                        self._summaries.clear()
                    self._summaries[marked] = found
            summary = found
        marker = compaction.turn_id if compaction is not None else None
        last = self._last.get(key)
        start, total = 0, 0
        grew = last is not None and last[0] == marker and len(turns) >= last[1] > 0
        if last is not None and grew and turns[last[1] - 1].id == last[2]:
            start, total = last[1], last[3]
        for turn in turns[start:]:
            total += self._turn(turn, tokenizer, overhead)
        if turns:
            self._last[key] = (marker, len(turns), turns[-1].id, total)
        return summary + total

    def written(
        self,
        turn_id: str,
        messages: Sequence[Message],
        counts: Sequence[int],
        tokenizer: Tokenizer,
        overhead: int,
    ) -> None:
        """Remember the size of a turn as it is written (``counts``: its messages' exact
        tokens by ``tokenizer``), so the next request, which finds it in history, does not
        size it: what ``turn_size`` gives for the stored turn, made from what is at hand."""
        size = messages_size(messages, counts, tokenizer, overhead)
        self._remember((turn_id, tokenizer.name, overhead), size)

    def _turn(self, turn: Turn, tokenizer: Tokenizer, overhead: int) -> int:
        key = (turn.id, tokenizer.name, overhead)
        size = self._turns.get(key)
        if size is None:
            size = turn_size(turn, tokenizer, overhead)
            self._remember(key, size)
        return size

    def _remember(self, key: tuple[str, str, int], size: int) -> None:
        with self._lock:
            if len(self._turns) >= _TURNS:
                self._turns.clear()
            self._turns[key] = size


def message_counts(
    messages: Sequence[Message], tokenizer: Tokenizer, known: Sequence[int | None] | None
) -> list[int]:
    """Each message's tokens: ``known[i]`` where the caller has it, else counted (through
    ``tokenizer``, a memo: a message counted before is not tokenized again)."""
    given = list(known) if known is not None else [None] * len(messages)
    return [
        g if g is not None else message_size(m, tokenizer)
        for m, g in zip(messages, given, strict=False)
    ]

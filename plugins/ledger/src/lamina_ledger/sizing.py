"""Sizes a ``LedgerSession`` works with, counted once: through the assembler's memo (a text
the kernel or an earlier call counted is not tokenized again) and per turn (a turn's size in
history never changes)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from lamina import Message, Tokenizer
from lamina_ledger.blocks import summary_text
from lamina_ledger.compaction import message_size, turn_size
from lamina_ledger.records import History
from lamina_ledger.settings import LedgerSettings

#: Turn sizes remembered before the memory is started afresh.
_TURNS = 200_000


@frozen(kw_only=True)
class MemoTokenizer:
    """``tokenizer`` counting through ``counter`` (the assembler's memoizing counter for the
    model), so what was counted once is not counted again."""

    tokenizer: Tokenizer
    counter: Any

    @property
    def name(self) -> str:
        return self.tokenizer.name

    @property
    def exact(self) -> bool:
        return self.tokenizer.exact

    def count(self, text: str) -> int:
        count: int = self.counter.count(text)
        return count

    def boundaries(self, text: str) -> Sequence[int]:
        return self.tokenizer.boundaries(text)


class Sizes:
    """Each turn's size in history by tokenizer and per-message framing, remembered."""

    def __init__(self) -> None:
        self._turns: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()

    def history(
        self, history: History, tokenizer: Tokenizer, overhead: int, settings: LedgerSettings
    ) -> int:
        """The tokens the history's blocks take (summary included), framing included."""
        total = 0
        if history.compaction is not None:
            text = summary_text(history.compaction.summary, settings)
            total += tokenizer.count(text) + overhead
        for turn in history.turns:
            key = (turn.id, tokenizer.name, overhead)
            size = self._turns.get(key)
            if size is None:
                size = turn_size(turn, tokenizer, overhead)
                with self._lock:
                    if len(self._turns) >= _TURNS:
                        self._turns.clear()
                    self._turns[key] = size
            total += size
        return total


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

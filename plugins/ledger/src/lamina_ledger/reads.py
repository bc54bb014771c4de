"""What a ``LedgerSession`` reads and counts around the kernel: the session's history (read
once per request on the session's thread, see ``lamina_ledger.vouch``), its exact size, the
event's tokens, and the kernel's run with the history provider answered from that read."""

from __future__ import annotations

from typing import Any

from lamina import AssembledContext, Assembler, AssemblyRequest, Tokenizer
from lamina_ledger.compaction import CompactionResult
from lamina_ledger.ledger import Ledger
from lamina_ledger.records import History
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.sizing import Sizes
from lamina_ledger.trigger import holds_capped
from lamina_ledger.vouch import history_of, vouched


class Reads:
    """The part of ``LedgerSession`` that reads the ledger and counts for its decisions."""

    assembler: Assembler
    ledger: Ledger
    target: str
    settings: LedgerSettings
    _sizes: Sizes

    def _kernel(self, request: AssemblyRequest) -> AssembledContext:
        """The kernel's assembly, its history provider giving the history read here, on this
        thread, just before (``lamina_ledger.vouch``: no hop to the provider pool)."""
        with vouched(self.target, self.ledger, request.session_label, request.parent_turn_id):
            return self.assembler.assemble(request)

    def _history(self, request: AssemblyRequest) -> History:
        """The request's history: as this thread read it last, unless written since."""
        return history_of(self.target, self.ledger, request.session_label, request.parent_turn_id)

    def _tokenizer(self, model: str) -> Tokenizer:
        """The model's tokenizer counting through the assembler's memo (its ``TokenCounter``),
        so what was counted once is not counted again."""
        counter: Tokenizer = self.assembler.model(model).counter
        return counter

    def _event_tokens(self, request: AssemblyRequest) -> int:
        return self._tokenizer(request.model).count(request.event.content)

    def _history_tokens(self, request: AssemblyRequest) -> int:
        """The ledger history's tokens as the kernel will measure them (exact counts)."""
        resolved = self.assembler.model(request.model)
        history = self._history(request)
        return self._sizes.history(
            history,
            self._tokenizer(request.model),
            resolved.info.message_overhead,
            self.settings,
        )

    def _holds_capped(self, request: AssemblyRequest, available: int) -> bool:
        """Whether the history holds a tool result the kernel will cap (then the kernel is
        asked whether it fits: the ledger counts the whole result)."""
        history = self._history(request)
        tokenizer = self._tokenizer(request.model)
        return holds_capped(history, tokenizer, self.assembler.config, available)


def budget_key(request: AssemblyRequest) -> tuple[Any, ...]:
    """What a request's budget outside history depends on, besides its event."""
    return (request.session_label, request.model, request.max_tokens, request.role)


def event_bound(request: AssemblyRequest) -> int:
    """At least the event's tokens by any byte-level tokenizer (a token is one byte or more;
    a few for markers it may add). A tokenizer counting more only makes the kernel cut
    instead, and the session compacts then (see ``LedgerSession._measure``)."""
    return len(request.event.content.encode("utf-8", "surrogatepass")) + 8


def continued(request: AssemblyRequest, result: CompactionResult | None) -> AssemblyRequest:
    """A request pinned to a turn (``parent_turn_id``) now continues from the compaction."""
    if result is None or request.parent_turn_id is None:
        return request
    from attrs import evolve

    return evolve(request, parent_turn_id=result.turn_id)

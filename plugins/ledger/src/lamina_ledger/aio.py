"""``LedgerSession`` 's calls for asyncio hosts: each runs the blocking call on a worker
thread, so the event loop never waits on the ledger or the tokenizer."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from lamina import AssembledContext, AssemblyRequest, Message, Usage
from lamina_ledger.compaction import CompactionResult
from lamina_ledger.records import Trigger

if TYPE_CHECKING:
    from lamina_ledger.session import LedgerSession


class AsyncCalls:
    """``aassemble``, ``arecover``, ``acompact`` and ``arecord_turn`` (mixed into
    ``LedgerSession``)."""

    async def aassemble(self, request: AssemblyRequest) -> AssembledContext:
        """``assemble`` on a worker thread (the event loop never waits on the ledger or the
        tokenizer)."""
        return await asyncio.to_thread(_session(self).assemble, request)

    async def arecover(
        self, request: AssemblyRequest, failed: AssembledContext | None = None
    ) -> AssembledContext:
        """``recover`` on a worker thread."""
        return await asyncio.to_thread(_session(self).recover, request, failed)

    async def acompact(
        self,
        request: AssemblyRequest,
        *,
        share: float | None = None,
        trigger: Trigger = "manual",
        instructions: str | None = None,
    ) -> CompactionResult | None:
        """``compact`` on a worker thread."""
        call = functools.partial(
            _session(self).compact, request, share=share, trigger=trigger, instructions=instructions
        )
        return await asyncio.to_thread(call)

    async def arecord_turn(
        self,
        request: AssemblyRequest | AssembledContext,
        messages: Sequence[Message],
        *,
        usage: Usage | None = None,
        message_tokens: Sequence[int | None] | None = None,
        **fields: Any,
    ) -> str:
        """``record_turn`` on a worker thread."""
        call = functools.partial(
            _session(self).record_turn,
            request,
            messages,
            usage=usage,
            message_tokens=message_tokens,
        )
        return await asyncio.to_thread(call, **fields)


def _session(calls: AsyncCalls) -> LedgerSession:
    """The ``LedgerSession`` these calls are mixed into (its blocking calls typed)."""
    return cast("LedgerSession", calls)

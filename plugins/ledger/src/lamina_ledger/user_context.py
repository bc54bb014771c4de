"""The ``context_json`` a recorded turn's user message gets from the event it answered."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from lamina import AssembledContext, AssemblyRequest, Event, event_context


def user_context(
    request: AssemblyRequest | AssembledContext,
    assembled: tuple[AssemblyRequest, datetime] | None,
    clock: Callable[[], datetime],
) -> dict[str, Any] | None:
    """The ``context_json`` for the turn's user message: the assembled context's own, else
    made from the request's event (injected when the session assembled it, else at the
    event's time, else ``clock()``). ``assembled``: the request the session last assembled
    for the label, and when. A request without an event (no content, attachments, hooks or
    platform) takes that request's event."""
    if isinstance(request, AssembledContext):
        if request.current_message.context_json is not None:
            return request.current_message.context_json
        if assembled is None or assembled[0].event.id != request.source_event_id:
            return None
        return event_context(assembled[0].event, assembled[1])
    event = request.event
    if assembled is not None and (assembled[0].event == event or no_event(event)):
        # the request this session assembled, or one that carries no event of its own
        # (a host recording a turn by session label): the event of the last assembly
        return event_context(assembled[0].event, assembled[1])
    if no_event(event):
        return None
    return event_context(event, event.time or clock())


def no_event(event: Event) -> bool:
    """Whether ``event`` carries nothing (no content, attachments, hooks or platform)."""
    return not (event.content or event.attachments or event.hook_data or event.platform)

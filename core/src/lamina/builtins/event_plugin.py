"""The current-event message of the Broker design: time, timezone, platform (managers only), hook data,
then the event's own content."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from lamina.hookspecs import hookimpl
from lamina.model.blocks import EVENT, Block, Provenance
from lamina.model.event_context import event_context
from lamina.model.messages import TextPart
from lamina.model.request import AssemblyRequest
from lamina.records import LayerProvider, ProviderContext


def event_time(request: AssemblyRequest, now: datetime) -> datetime:
    """When the event happened (its own time, else now), timezone-aware."""
    when = request.event.time or now
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def local_time(when: datetime, timezone: str) -> datetime:
    """``when`` in ``timezone`` (UTC when it is unknown); zoneinfo is imported only for a
    zone other than UTC (its import is a noticeable part of a command's start)."""
    if timezone in ("UTC", "Etc/UTC"):
        return when if when.tzinfo is UTC else when.astimezone(UTC)
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return when.astimezone(ZoneInfo(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        return when.astimezone(UTC)


#: Two-digit numbers as ``isoformat`` writes them.
_TWO = tuple(f"{i:02d}" for i in range(100))


def iso_time(when: datetime) -> str:
    """``when.isoformat()``, built from table lookups: ``isoformat`` goes through C's
    ``printf``, code a request would otherwise run only for this one line (cold in the
    caches each time, some 170 lines of 64 bytes)."""
    two = _TWO
    text = f"{str(when.year).zfill(4)}-{two[when.month]}-{two[when.day]}"
    text = f"{text}T{two[when.hour]}:{two[when.minute]}:{two[when.second]}"
    if when.microsecond:
        text = f"{text}.{str(1_000_000 + when.microsecond)[1:]}"
    offset = when.utcoffset()
    if offset is None:
        return text
    sign, offset = ("-", -offset) if offset.days < 0 else ("+", offset)
    minutes, seconds = divmod(offset.seconds, 60)
    text = f"{text}{sign}{two[minutes // 60]}:{two[minutes % 60]}"
    if seconds or offset.microseconds:
        text = f"{text}:{two[seconds]}"
        if offset.microseconds:
            text = f"{text}.{str(1_000_000 + offset.microseconds)[1:]}"
    return text


def event_lines(request: AssemblyRequest, now: datetime) -> list[str]:
    """The dynamic context lines that precede the event content."""
    event = request.event
    when = local_time(event_time(request, now), event.timezone)
    lines = [f"Current time: {iso_time(when)}", f"Timezone: {event.timezone}"]
    if request.role == "manager":
        if event.channel:
            lines.append(f"Channel: {event.channel}")
        if event.platform:
            lines.append(f"Platform: {event.platform}")
            if event.platform_actions:
                lines.append(f"Available actions: {', '.join(event.platform_actions)}")
    for name in sorted(event.hook_data):
        value = event.hook_data[name]
        rendered = (
            value
            if isinstance(value, str)
            else json.dumps(value, sort_keys=True, ensure_ascii=False)
        )
        lines.append(f"Hook {name}: {rendered}")
    return lines


#: The last inputs and the blocks they gave: the same event assembled again (a retry, a
#: compaction's second look, a warm assembly) gets the same block objects, which the kernel
#: recognises and does not measure again.
_last: tuple[tuple[Any, ...], list[Block]] | None = None


def provide(ctx: ProviderContext) -> list[Block]:
    global _last
    request = ctx.request
    key = (request.event, request.role, ctx.now, ctx.plugin)
    last = _last
    if last is not None and last[0] == key:
        return list(last[1])
    blocks = list(_blocks(ctx))
    _last = (key, blocks)
    return list(blocks)


def _blocks(ctx: ProviderContext) -> Iterator[Block]:
    request = ctx.request
    # The current message's context_json travels with the content block (see format).
    recorded = event_context(request.event, event_time(request, ctx.now))
    yield Block.text(
        "event:context",
        EVENT,
        "\n".join(event_lines(request, ctx.now)),
        required=True,
        trusted=True,
        provenance=Provenance(plugin=ctx.plugin, source_id=request.event.id),
    )
    yield Block(
        id="event:content",
        layer=EVENT,
        role="user",
        content=(TextPart(text=request.event.content), *request.event.attachments),
        required=True,
        trusted=True,
        provenance=Provenance(
            plugin=ctx.plugin, source_id=request.event.id, metadata={"context_json": recorded}
        ),
    )


@hookimpl
def lamina_layer_providers() -> list[LayerProvider]:
    return [
        LayerProvider(
            name="event",
            provide=provide,
            layers=(EVENT,),
            required=True,
            description="current time, timezone, platform and actions (managers), hook data, content",
            inline=True,
        )
    ]

"""The ``context_json`` of the current event's user message, as the Broker design records it:
the event's platform and hooks, what was attached, and when the context was injected."""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from lamina.model.messages import ImagePart, Part, TextPart, ToolCallPart, ToolResultPart
from lamina.model.request import Event


def attachment_record(part: Part) -> dict[str, Any]:
    """What is recorded of one attachment (never inline image data, only its size)."""
    if isinstance(part, ImagePart):
        if part.url is not None:
            return {"type": "image", "mediaType": part.media_type, "url": part.url}
        try:
            size = len(base64.b64decode(part.data or "", validate=False))
        except (binascii.Error, ValueError):
            size = len(part.data or "")
        return {"type": "image", "mediaType": part.media_type, "bytes": size}
    if isinstance(part, TextPart):
        return {"type": "text", "chars": len(part.text)}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "name": part.name}
    if isinstance(part, ToolResultPart):
        return {"type": "tool_result", "callId": part.call_id}
    return {"type": type(part).__name__}


def event_context(event: Event, injected_at: datetime) -> dict[str, Any]:
    """``{"event": {"platform", "hookCount", ...}, "attachments": [...], "injectedAt": ms}``:
    the event's platform and hooks (names sorted; channel, id and source when set), each
    attachment, and ``injected_at`` as milliseconds since the Unix epoch (naive means UTC)."""
    facts: dict[str, Any] = {"platform": event.platform, "hookCount": len(event.hook_data)}
    if event.hook_data:
        facts["hooks"] = sorted(event.hook_data)
    for key, value in (("channel", event.channel), ("id", event.id), ("source", event.source)):
        if value is not None:
            facts[key] = value
    when = injected_at if injected_at.tzinfo is not None else injected_at.replace(tzinfo=UTC)
    return {
        "event": facts,
        "attachments": [attachment_record(p) for p in event.attachments],
        "injectedAt": int(when.timestamp() * 1000),
    }


def merge_context_json(found: Iterable[Any]) -> dict[str, Any] | None:
    """The ``context_json`` records of several blocks as one: objects merged key by key, lists
    joined (one block's attachments after another's), other values taken from the later block;
    ``None`` when no block has one."""
    merged: dict[str, Any] | None = None
    for record in found:
        if isinstance(record, dict):
            merged = {} if merged is None else merged
            _merge_into(merged, record)
    return merged


def _merge_into(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        here = into.get(key)
        if isinstance(value, dict) and isinstance(here, dict):
            _merge_into(here, value)
        elif isinstance(value, list) and isinstance(here, list):
            into[key] = [*here, *map(_copied, value)]  # (``here`` is a copy already)
        else:
            into[key] = _copied(value)


def _copied(value: Any) -> Any:
    """A deep copy of a JSON-like value (what ``copy.deepcopy`` gives, without its memo and
    dispatch for the dicts, lists and scalars a ``context_json`` holds)."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)

"""The ``anthropic`` adapter: an ``AssembledContext`` as a Messages API request, with
``cache_control`` breakpoints at the end of the static system prompt and of the history."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from lamina import AssembledContext, ImagePart, ToolCallPart, ToolResultPart, Usage
from lamina.adapters import (
    ANTHROPIC_TOOL_NAME,
    ANTHROPIC_TOOL_USE_ID,
    Turn,
    context_turns,
    count,
    dig,
    overflow_detector,
    planned_info,
    reply_tokens,
    sampling,
    tool_arguments,
)
from lamina_anthropic.models import DEFAULT_MIN_CACHE_PREFIX, PROVIDER, model_info
from lamina_anthropic.settings import AnthropicSettings

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})

#: ``prompt is too long: N tokens > M maximum`` and its relatives.
is_context_overflow = overflow_detector(
    "prompt is too long", "exceed context limit", "context window", "too many tokens"
)


def _block(part: Any) -> dict[str, Any]:
    if isinstance(part, ToolResultPart):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": part.call_id,
            "content": part.content,
        }
        if part.is_error:
            block["is_error"] = True
        return block
    if isinstance(part, ToolCallPart):
        key = f"tool call {part.id!r}"
        return {
            "type": "tool_use",
            "id": ANTHROPIC_TOOL_USE_ID.check(part.id, adapter=PROVIDER, key=key),
            "name": ANTHROPIC_TOOL_NAME.check(part.name, adapter=PROVIDER, key=key),
            "input": tool_arguments(part),
        }
    if isinstance(part, ImagePart):
        if part.url is not None:
            return {"type": "image", "source": {"type": "url", "url": part.url}}
        if part.media_type in IMAGE_TYPES:
            source = {"type": "base64", "media_type": part.media_type, "data": part.data}
            return {"type": "image", "source": source}
        return {
            "type": "text",
            "text": f"[image of type {part.media_type} left out: not supported]",
        }
    return {"type": "text", "text": part.text}


def _tools_tokens(context: AssembledContext) -> int:
    """A rough size of the tool definitions, which precede the system prompt in the cache."""
    if not context.tools:
        return 0
    spec = [(t.name, t.description, t.input_schema) for t in context.tools]
    return math.ceil(len(json.dumps(spec)) / 4)


def build(
    context: AssembledContext, options: Mapping[str, Any], settings: AnthropicSettings
) -> dict[str, Any]:
    """The Messages request body. Breakpoints go only where the cached prefix reaches the
    model's minimum cacheable length (else Anthropic ignores them and they just use a slot)."""
    info = planned_info(context, PROVIDER) or model_info(context.model, settings.models)
    minimum = info.min_cache_prefix if info else DEFAULT_MIN_CACHE_PREFIX
    cache = settings.cache and bool(options.get("cache", True))
    control = {"type": "ephemeral", "ttl": settings.cache_ttl}
    used = context.token_budget.used
    body: dict[str, Any] = {
        "model": context.model,
        "max_tokens": reply_tokens(context, options, info.max_output if info else None, 4096),
    }
    prefix = _tools_tokens(context) + used.system_prompt
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
        if cache and prefix >= minimum:
            system["cache_control"] = dict(control)
        body["system"] = [system]
    history_len = len(context.history)
    conversation: list[Turn] = context_turns(context)
    messages: list[dict[str, Any]] = []
    last_history: dict[str, Any] | None = None
    for turn in conversation:
        blocks = []
        for part, origin in zip(turn.parts, turn.origins, strict=True):
            blocks.append(_block(part))
            if origin < history_len:
                last_history = blocks[-1]
        messages.append({"role": turn.role, "content": blocks})
    if cache and last_history is not None and prefix + used.history >= minimum:
        last_history["cache_control"] = dict(control)
    body["messages"] = messages
    if context.tools:
        body["tools"] = [
            {
                "name": ANTHROPIC_TOOL_NAME.check(t.name, adapter=PROVIDER, key=f"tools[{i}].name"),
                "description": t.description,
                "input_schema": t.input_schema,
            }
            for i, t in enumerate(context.tools)
        ]
    body.update(sampling(context))
    if context.model_config.thinking:
        body["thinking"] = context.model_config.thinking
    return body


def parse_usage(response: Any) -> Usage:
    """Anthropic reports uncached input apart from cache reads and writes; Lamina's
    ``input_tokens`` is all of it."""
    usage = dig(response, "usage") or response
    fresh = count(usage, "input_tokens")
    read = count(usage, "cache_read_input_tokens")
    written = count(usage, "cache_creation_input_tokens")
    return Usage(
        input_tokens=fresh + read + written,
        cached_input_tokens=read,
        cache_creation_tokens=written,
        output_tokens=count(usage, "output_tokens"),
    )

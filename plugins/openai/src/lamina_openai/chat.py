"""The ``openai`` adapter: an ``AssembledContext`` as a Chat Completions request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina import AssembledContext, ImagePart, TextPart, ToolCallPart, ToolResultPart, Usage
from lamina.adapters import (
    OPENAI_TOOL_NAME,
    Turn,
    arguments_json,
    context_turns,
    count,
    data_url,
    dig,
    openai_tools,
    overflow_detector,
    planned_info,
    reply_tokens,
    result_text,
    sampling,
)
from lamina_openai.models import PROVIDER, is_reasoning, model_info
from lamina_openai.settings import OpenAISettings

#: OpenAI's ``context_length_exceeded`` (either API).
is_context_overflow = overflow_detector(
    "context_length_exceeded", "maximum context length", "exceeds the context window"
)


def system_role(settings: OpenAISettings, model: str) -> str:
    """``system`` or ``developer``, as configured (``auto``: by model family)."""
    if settings.system_role != "auto":
        return settings.system_role
    return "developer" if is_reasoning(model) else "system"


def image_url(part: ImagePart) -> str:
    return part.url if part.url is not None else data_url(part.media_type, part.data or "")


def call_name(part: ToolCallPart, adapter: str) -> str:
    """The name of a call sent as a function call, checked against OpenAI's rule."""
    return OPENAI_TOOL_NAME.check(part.name, adapter=adapter, key=f"tool call {part.id!r}")


def _text(parts: tuple[Any, ...]) -> str:
    return "\n\n".join(p.text if isinstance(p, TextPart) else "[image]" for p in parts)


def _user(turn: Turn) -> list[dict[str, Any]]:
    """A user turn: one ``tool`` message per result, then the user's own content."""
    if len(turn.parts) == 1 and type(turn.parts[0]) is TextPart:  # (most turns: one text)
        return [{"role": "user", "content": turn.parts[0].text}]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": p.call_id, "content": result_text(p)}
        for p in turn.parts
        if isinstance(p, ToolResultPart)
    ]
    rest = [p for p in turn.parts if not isinstance(p, ToolResultPart)]
    if rest and all(isinstance(p, TextPart) for p in rest):
        out.append({"role": "user", "content": _text(tuple(rest))})
    elif rest:
        content = [
            {"type": "image_url", "image_url": {"url": image_url(p)}}
            if isinstance(p, ImagePart)
            else {"type": "text", "text": _text((p,))}
            for p in rest
        ]
        out.append({"role": "user", "content": content})
    return out


def _assistant(turn: Turn) -> dict[str, Any]:
    if len(turn.parts) == 1 and type(turn.parts[0]) is TextPart:  # (most turns: one text)
        return {"role": "assistant", "content": turn.parts[0].text}
    calls = [p for p in turn.parts if isinstance(p, ToolCallPart)]
    other = tuple(p for p in turn.parts if not isinstance(p, ToolCallPart))
    message: dict[str, Any] = {"role": "assistant", "content": _text(other) if other else None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": call_name(c, "openai"), "arguments": arguments_json(c)},
            }
            for c in calls
        ]
    return message


def build(
    context: AssembledContext, options: Mapping[str, Any], settings: OpenAISettings
) -> dict[str, Any]:
    """The Chat Completions request body: system (or developer) message first, then the
    conversation, tools, the reply limit and the session's prompt cache key."""
    messages: list[dict[str, Any]] = []
    if context.system_prompt:
        messages.append(
            {"role": system_role(settings, context.model), "content": context.system_prompt}
        )
    for turn in context_turns(context, lead_in=None):
        messages.extend(_user(turn) if turn.role == "user" else [_assistant(turn)])
    info = planned_info(context, PROVIDER) or model_info(context.model, settings.models)
    body: dict[str, Any] = {"model": context.model, "messages": messages}
    if context.tools:
        body["tools"] = openai_tools(context.tools, rule=OPENAI_TOOL_NAME, adapter="openai")
    body["max_completion_tokens"] = reply_tokens(
        context, options, info.max_output if info else None, 4096
    )
    body.update(sampling(context))
    if settings.prompt_cache_key and context.session_label:
        body["prompt_cache_key"] = context.session_label
    return body


def parse_usage(response: Any) -> Usage:
    """Usage of a Chat Completions or Responses reply (object or JSON, or its ``usage``)."""
    usage = dig(response, "usage") or response
    prompt = count(usage, "prompt_tokens") or count(usage, "input_tokens")
    cached = count(usage, "prompt_tokens_details", "cached_tokens") or count(
        usage, "input_tokens_details", "cached_tokens"
    )
    output = count(usage, "completion_tokens") or count(usage, "output_tokens")
    return Usage(input_tokens=prompt, cached_input_tokens=cached, output_tokens=output)

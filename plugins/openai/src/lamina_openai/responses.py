"""The ``openai-responses`` adapter: an ``AssembledContext`` as a Responses API request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina import AssembledContext, ImagePart, TextPart, ToolCallPart, ToolResultPart
from lamina.adapters import (
    OPENAI_TOOL_NAME,
    Turn,
    arguments_json,
    context_turns,
    planned_info,
    reply_tokens,
    result_text,
    sampling,
)
from lamina_openai.chat import call_name, image_url
from lamina_openai.models import PROVIDER, model_info
from lamina_openai.settings import OpenAISettings


def _items(turn: Turn) -> list[dict[str, Any]]:
    """Input items for one turn: function calls / outputs as their own items, text and images
    as a message (user text is ``input_text``; assistant text is plain message content)."""
    items: list[dict[str, Any]] = []
    content: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, ToolResultPart):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": part.call_id,
                    "output": result_text(part),
                }
            )
        elif isinstance(part, ToolCallPart):
            items.append(
                {
                    "type": "function_call",
                    "call_id": part.id,
                    "name": call_name(part, "openai-responses"),
                    "arguments": arguments_json(part),
                }
            )
        elif isinstance(part, ImagePart) and turn.role == "user":
            content.append({"type": "input_image", "image_url": image_url(part), "detail": "auto"})
        else:
            text = part.text if isinstance(part, TextPart) else "[image]"
            content.append({"type": "input_text", "text": text})
    if not content:
        return items
    if turn.role == "assistant":
        text = "\n\n".join(c["text"] for c in content)
        message: dict[str, Any] = {"type": "message", "role": "assistant", "content": text}
    else:
        message = {"type": "message", "role": "user", "content": content}
    # results answer the previous turn's calls, so they go before this turn's own message
    results = [i for i in items if i["type"] == "function_call_output"]
    calls = [i for i in items if i["type"] == "function_call"]
    return [*results, message, *calls]


def build(
    context: AssembledContext, options: Mapping[str, Any], settings: OpenAISettings
) -> dict[str, Any]:
    """The Responses request body: ``instructions`` (the stable system prompt), ``input``
    items, function tools, the reply limit and the session's prompt cache key."""
    body: dict[str, Any] = {"model": context.model}
    if context.system_prompt:
        body["instructions"] = context.system_prompt
    body["input"] = [item for turn in context_turns(context, lead_in=None) for item in _items(turn)]
    if context.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": OPENAI_TOOL_NAME.check(
                    t.name, adapter="openai-responses", key=f"tools[{i}].name"
                ),
                "description": t.description,
                "parameters": t.input_schema,
                "strict": False,
            }
            for i, t in enumerate(context.tools)
        ]
    info = planned_info(context, PROVIDER) or model_info(context.model, settings.models)
    body["max_output_tokens"] = reply_tokens(
        context, options, info.max_output if info else None, 4096
    )
    body.update(sampling(context))
    if settings.prompt_cache_key and context.session_label:
        body["prompt_cache_key"] = context.session_label
    return body

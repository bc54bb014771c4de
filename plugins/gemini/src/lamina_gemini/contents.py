"""The ``gemini`` adapter: an ``AssembledContext`` as a ``generateContent`` request body
(REST JSON, camelCase), for ``POST …/models/{model}:generateContent``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina import AssembledContext, ImagePart, TextPart, ToolCallPart, ToolResultPart, Usage
from lamina.adapters import (
    GEMINI_FUNCTION_NAME,
    context_turns,
    count,
    dig,
    overflow_detector,
    planned_info,
    reply_tokens,
    tool_arguments,
)
from lamina_gemini.models import PROVIDER, model_info
from lamina_gemini.settings import GeminiSettings

#: ``The input token count (N) exceeds the maximum number of tokens allowed (M).``
is_context_overflow = overflow_detector(
    "exceeds the maximum number of tokens", "input token count", "context window"
)


def _part(part: Any, names: Mapping[str, str]) -> dict[str, Any]:
    if isinstance(part, ToolCallPart):
        name = GEMINI_FUNCTION_NAME.check(part.name, adapter=PROVIDER, key=f"tool call {part.id!r}")
        return {"functionCall": {"id": part.id, "name": name, "args": tool_arguments(part)}}
    if isinstance(part, ToolResultPart):
        key = "error" if part.is_error else "output"
        return {
            "functionResponse": {
                "id": part.call_id,
                "name": names[part.call_id],
                "response": {key: part.content},
            }
        }
    if isinstance(part, ImagePart):
        if part.url is not None:
            return {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}
        return {"inlineData": {"mimeType": part.media_type, "data": part.data}}
    assert isinstance(part, TextPart)
    return {"text": part.text}


def build(
    context: AssembledContext, options: Mapping[str, Any], settings: GeminiSettings
) -> dict[str, Any]:
    """``systemInstruction`` first (the stable prefix), then alternating user/model
    ``contents`` (function responses answer in the user turn after the calls), tools as
    function declarations with their JSON schema, and the reply limit."""
    body: dict[str, Any] = {}
    if context.system_prompt:
        body["systemInstruction"] = {"parts": [{"text": context.system_prompt}]}
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # the turn before's calls: those a turn's results answer
    for turn in context_turns(context):
        role = "model" if turn.role == "assistant" else "user"
        contents.append({"role": role, "parts": [_part(p, names) for p in turn.parts]})
        names = {p.id: p.name for p in turn.parts if isinstance(p, ToolCallPart)}
    body["contents"] = contents
    if context.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": GEMINI_FUNCTION_NAME.check(
                            t.name, adapter=PROVIDER, key=f"tools[{i}].name"
                        ),
                        "description": t.description,
                        "parametersJsonSchema": t.input_schema,
                    }
                    for i, t in enumerate(context.tools)
                ]
            }
        ]
    info = planned_info(context, PROVIDER) or model_info(context.model, settings.models)
    config: dict[str, Any] = {
        "maxOutputTokens": reply_tokens(context, options, info.max_output if info else None, 8192)
    }
    if context.model_config.temperature is not None:
        config["temperature"] = context.model_config.temperature
    if context.model_config.thinking:
        config["thinkingConfig"] = context.model_config.thinking
    body["generationConfig"] = config
    return body


def parse_usage(response: Any) -> Usage:
    """``usageMetadata``: the prompt includes cached content; thoughts count as output."""
    meta = dig(response, "usage_metadata") or response
    return Usage(
        input_tokens=count(meta, "prompt_token_count"),
        cached_input_tokens=count(meta, "cached_content_token_count"),
        output_tokens=count(meta, "candidates_token_count") + count(meta, "thoughts_token_count"),
    )

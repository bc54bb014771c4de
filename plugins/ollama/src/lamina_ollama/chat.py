"""The ``ollama`` adapter: an ``AssembledContext`` as an ``/api/chat`` request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lamina import AssembledContext, ImagePart, TextPart, ToolCallPart, ToolResultPart, Usage
from lamina.adapters import (
    Turn,
    context_turns,
    count,
    openai_tools,
    overflow_detector,
    planned_info,
    reply_tokens,
    result_text,
    sampling,
    tool_arguments,
)
from lamina_ollama.models import PROVIDER, local_name, model_info
from lamina_ollama.settings import OllamaSettings

#: Ollama's "input length exceeds maximum context length" and kin.
is_context_overflow = overflow_detector(
    "context length", "context window", "exceeds maximum context", "prompt too long"
)


def _messages(turn: Turn, names: Mapping[str, str]) -> list[dict[str, Any]]:
    """One turn as Ollama messages: ``tool`` messages (matched to calls by order and name),
    then the user's or assistant's text, base64 images and tool calls."""
    out: list[dict[str, Any]] = [
        {"role": "tool", "content": result_text(p), "tool_name": names[p.call_id]}
        for p in turn.parts
        if isinstance(p, ToolResultPart)
    ]
    texts: list[str] = []
    images: list[str] = []
    calls: list[dict[str, Any]] = []
    for part in turn.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImagePart) and part.data is not None and turn.role == "user":
            images.append(part.data)
        elif isinstance(part, ImagePart):
            texts.append(f"[image {part.url or part.media_type}: Ollama takes inline images only]")
        elif isinstance(part, ToolCallPart):
            calls.append({"function": {"name": part.name, "arguments": tool_arguments(part)}})
    if texts or images or calls:
        message: dict[str, Any] = {"role": turn.role, "content": "\n\n".join(texts)}
        if images:
            message["images"] = images
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def build(
    context: AssembledContext, options: Mapping[str, Any], settings: OllamaSettings
) -> dict[str, Any]:
    """The chat request: system message first (Ollama has no system field), the
    conversation, tools, and ``options.num_ctx`` = the window the budget was planned for."""
    messages: list[dict[str, Any]] = []
    if context.system_prompt:
        messages.append({"role": "system", "content": context.system_prompt})
    names: dict[str, str] = {}  # the turn before's calls: those a turn's results answer
    for turn in context_turns(context, lead_in=None):
        messages.extend(_messages(turn, names))
        names = {p.id: p.name for p in turn.parts if isinstance(p, ToolCallPart)}
    body: dict[str, Any] = {
        "model": local_name(context.model) or context.model,
        "messages": messages,
    }
    if context.tools:
        # Ollama documents no rule for tool names: they are sent as given
        body["tools"] = openai_tools(context.tools, rule=None, adapter=PROVIDER)
    info = planned_info(context, PROVIDER) or model_info(context.model, settings.models)
    body["stream"] = bool(options.get("stream", False))
    body["options"] = {
        "num_ctx": context.token_budget.model_limit,
        "num_predict": reply_tokens(context, options, info.max_output if info else None, 2048),
        **sampling(context),
    }
    if settings.keep_alive is not None:
        body["keep_alive"] = settings.keep_alive
    return body


def parse_usage(response: Any) -> Usage:
    """``prompt_eval_count`` and ``eval_count`` (Ollama reports no cache figures)."""
    return Usage(
        input_tokens=count(response, "prompt_eval_count"),
        output_tokens=count(response, "eval_count"),
    )

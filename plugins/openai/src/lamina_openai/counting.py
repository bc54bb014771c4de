"""Exact prompt token counts for OpenAI chat models, as OpenAI's cookbook "How to count tokens
with tiktoken" computes them: per-message framing, names, reply priming, tool definitions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lamina import Tokenizer, Tool

#: ``<|start|>{role}<|message|>…<|end|>``: 3 framing tokens plus the role, which is one token
#: in both encodings; the kernel counts only the content, so the role is folded in here.
MESSAGE_OVERHEAD = 3 + 1
#: Every reply is primed with ``<|start|>assistant<|message|>``.
REPLY_OVERHEAD = 3
#: A message's ``name`` costs its tokens plus one.
NAME_OVERHEAD = 1
#: Tool-definition framing: (function start, properties start, per property, enum start,
#: per enum item, end of tools) for gpt-4o and later, and for gpt-4 / gpt-3.5-turbo.
_TOOL_FRAMING_O200K = (7, 3, 3, -3, 3, 12)
_TOOL_FRAMING_CL100K = (10, 3, 3, -3, 3, 12)


def count_messages(messages: Sequence[Mapping[str, str]], tokenizer: Tokenizer) -> int:
    """Prompt tokens of chat ``messages`` (``role``, ``content``, optional ``name``), reply
    priming included. The role is part of ``MESSAGE_OVERHEAD`` (one token for every role)."""
    total = REPLY_OVERHEAD
    for message in messages:
        total += MESSAGE_OVERHEAD + tokenizer.count(message.get("content", ""))
        name = message.get("name")
        if name:
            total += tokenizer.count(name) + NAME_OVERHEAD
    return total


def count_tools(tools: Sequence[Tool], tokenizer: Tokenizer) -> int:
    """Tokens the tool definitions add to the prompt (the cookbook's ``num_tokens_for_tools``:
    name and description, each property's name, type, description and enum values)."""
    if not tools:
        return 0
    legacy = tokenizer.name == "cl100k_base"
    func_init, prop_init, prop_key, enum_init, enum_item, func_end = (
        _TOOL_FRAMING_CL100K if legacy else _TOOL_FRAMING_O200K
    )
    total = 0
    for tool in tools:
        total += func_init + tokenizer.count(f"{tool.name}:{tool.description.removesuffix('.')}")
        properties: Mapping[str, Any] = tool.input_schema.get("properties") or {}
        if properties:
            total += prop_init
        for key, spec in properties.items():
            total += prop_key
            enum = spec.get("enum") or ()
            if enum:
                total += enum_init + sum(enum_item + tokenizer.count(str(v)) for v in enum)
            description = str(spec.get("description", "")).removesuffix(".")
            total += tokenizer.count(f"{key}:{spec.get('type', '')}:{description}")
    return total + func_end

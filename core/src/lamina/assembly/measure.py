"""Measure: what each block costs in tokens, by the kernel's one set of rules.

``count_parts`` is public: plugins that size messages ahead of assembly (compaction, say) use
it rather than copying the rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from lamina.model.messages import Part, TextPart, ToolCallPart, ToolResultPart

#: Tokens charged for an image part: providers bill by size; this is a conservative flat rate.
IMAGE_TOKENS = 1024


def count_parts(parts: Sequence[Part], count: Callable[[str], int]) -> int:
    """The tokens of a message's parts as the kernel charges them: text and tool results by
    their text, a tool call by its name and its arguments' canonical JSON, an image at
    ``IMAGE_TOKENS``. ``count`` counts one string (a tokenizer's ``count``)."""
    total = 0
    for part in parts:
        if isinstance(part, TextPart):
            total += count(part.text)
        elif isinstance(part, ToolResultPart):
            total += count(part.content)
        elif isinstance(part, ToolCallPart):
            total += count(part.name) + count(
                json.dumps(part.arguments, sort_keys=True, ensure_ascii=False)
            )
        else:
            total += IMAGE_TOKENS
    return total

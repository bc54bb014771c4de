"""Masking one block: every text, tool result and string inside tool-call arguments."""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from lamina import Block, Part, TextPart, ToolCallPart, ToolResultPart
from lamina_redaction.detectors import Redactor


class _Masker:
    """Masks strings and keeps count of the kinds of secret found."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.found: Counter[str] = Counter()

    def text(self, text: str) -> str:
        masked, found = self.redactor.redact(text)
        self.found += found
        return masked

    def value(self, value: Any) -> Any:
        """Strings anywhere inside JSON-like data (tool-call arguments)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.value(v) for v in value)
        return value

    def part(self, part: Part) -> Part:
        if isinstance(part, TextPart):
            text = self.text(part.text)
            return part if text == part.text else attrs.evolve(part, text=text)
        if isinstance(part, ToolResultPart):
            content = self.text(part.content)
            return part if content == part.content else attrs.evolve(part, content=content)
        if isinstance(part, ToolCallPart):
            arguments = self.value(part.arguments)
            return part if arguments == part.arguments else attrs.evolve(part, arguments=arguments)
        return part


def mask_block(block: Block, redactor: Redactor) -> tuple[Block, Counter[str]]:
    """``block`` with every secret masked, and the kinds found (the same block if none)."""
    masker = _Masker(redactor)
    parts = tuple(masker.part(p) for p in block.content)
    if not masker.found:
        return block, masker.found
    return attrs.evolve(block, content=parts), masker.found

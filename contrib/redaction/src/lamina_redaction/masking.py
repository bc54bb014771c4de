"""Masking an ``AssembledContext``: system prompt, every history message, the current message;
the token usage is corrected by what masking changed."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import attrs

from lamina import (
    AssembledContext,
    BudgetError,
    Message,
    Part,
    TextPart,
    TokenBudget,
    Tokenizer,
    ToolCallPart,
    ToolResultPart,
)
from lamina_redaction.detectors import Redactor


class _Masker:
    """Masks strings and keeps the kinds found and the token difference per physical layer."""

    def __init__(self, redactor: Redactor, tokenizer: Tokenizer) -> None:
        self.redactor = redactor
        self.tokenizer = tokenizer
        self.found: Counter[str] = Counter()
        self.delta = 0

    def text(self, text: str) -> str:
        masked, found = self.redactor.redact(text)
        if found:
            self.found += found
            self.delta += self.tokenizer.count(masked) - self.tokenizer.count(text)
        return masked

    def value(self, value: Any) -> Any:
        """Strings anywhere inside JSON-like data (tool-call arguments)."""
        if isinstance(value, str):
            masked, found = self.redactor.redact(value)
            self.found += found
            return masked
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
            if arguments == part.arguments:
                return part

            def dump(a: Any) -> str:
                return json.dumps(a, sort_keys=True, ensure_ascii=False)

            self.delta += self.tokenizer.count(dump(arguments)) - self.tokenizer.count(
                dump(part.arguments)
            )
            return attrs.evolve(part, arguments=arguments)
        return part

    def message(self, message: Message) -> Message:
        parts = tuple(self.part(p) for p in message.content)
        return message if parts == message.content else attrs.evolve(message, content=parts)


def mask_context(
    ctx: AssembledContext, redactor: Redactor, tokenizer: Tokenizer, found: Counter[str]
) -> AssembledContext:
    """``ctx`` with every secret masked, its usage corrected, a report warning saying what was
    masked (``found`` holds what was already masked in the request)."""
    system, history, event = (_Masker(redactor, tokenizer) for _ in range(3))
    masked = attrs.evolve(
        ctx,
        system_prompt=system.text(ctx.system_prompt),
        history=tuple(history.message(m) for m in ctx.history),
        current_message=event.message(ctx.current_message),
    )
    total = found + system.found + history.found + event.found
    if not total:
        return ctx
    budget = ctx.token_budget
    used = _usage(budget, system.delta, history.delta, event.delta)
    if used.total > budget.available:
        over = used.total - budget.available
        raise BudgetError(
            f"plugin 'redaction': the masked context needs {used.total} tokens, {over} more "
            f"than the {budget.available} available (masks longer than the secrets they hide)",
            overage=over,
            available=budget.available,
        )
    report = ctx.report
    prefix = report.stable_prefix
    if prefix is not None:
        prefix = attrs.evolve(prefix, tokens=max(0, prefix.tokens + system.delta + history.delta))
    kinds = ", ".join(f"{kind} ×{n}" for kind, n in sorted(total.items()))
    warning = f"plugin 'redaction': masked {sum(total.values())} secret(s): {kinds}"
    return attrs.evolve(
        masked,
        token_budget=TokenBudget(
            model_limit=budget.model_limit,
            reserve_response=budget.reserve_response,
            reserve_tools=budget.reserve_tools,
            available=budget.available,
            used=used,
        ),
        report=attrs.evolve(report, warnings=(*report.warnings, warning), stable_prefix=prefix),
    )


def _usage(budget: TokenBudget, system: int, history: int, event: int) -> Any:
    """The budget's usage with each layer moved by what masking changed (never below 0)."""
    used = budget.used
    s = max(0, used.system_prompt + system)
    h = max(0, used.history + history)
    e = max(0, used.event + event)
    return attrs.evolve(used, system_prompt=s, history=h, event=e, total=s + h + e)

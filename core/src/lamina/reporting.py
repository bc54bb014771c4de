"""Human-facing renderings of an assembled context: seed 002's YAML report and a text view."""

from __future__ import annotations

import json
from typing import Any

from lamina.model.context import AssembledContext
from lamina.model.messages import Message, TextPart, ToolCallPart, ToolResultPart


def report_document(ctx: AssembledContext) -> dict[str, Any]:
    """The report in seed 002's shape (budget, included, excluded, warnings), plus layers,
    tokenizer, stable prefix and timings."""
    report, budget = ctx.report, ctx.token_budget
    included, excluded = [], []
    for b in report.blocks:
        name = b.path or b.id
        if b.status == "dropped":
            excluded.append(
                {
                    "path": name,
                    "layer": b.layer,
                    "tokens": b.original_tokens,
                    "reason": b.reason or "",
                }
            )
            continue
        entry: dict[str, Any] = {"path": name, "layer": b.layer, "tokens": b.tokens}
        if b.details.get("items"):
            entry["items"] = b.details["items"]
        entry["truncated"] = b.status in ("truncated", "summarized")
        if entry["truncated"]:
            entry["original_tokens"] = b.original_tokens
            entry["strategy"] = b.strategy
        included.append(entry)
    warnings = list(report.warnings)
    if excluded:
        warnings.append(f"{len(excluded)} blocks excluded")
    cut = sum(1 for b in report.blocks if b.status in ("truncated", "summarized"))
    if cut:
        warnings.append(f"{cut} blocks truncated or summarized")
    return {
        "assembly_report": {
            "budget": {
                "max": budget.available,
                "used": budget.used.total,
                "remaining": budget.remaining,
                "model_limit": budget.model_limit,
                "reserve_response": budget.reserve_response,
                "reserve_tools": budget.reserve_tools,
                "used_by_layer": {
                    "system_prompt": budget.used.system_prompt,
                    "history": budget.used.history,
                    "event": budget.used.event,
                },
            },
            "tokenizer": {
                "name": report.tokenizer.name if report.tokenizer else None,
                "exact": report.tokenizer.exact if report.tokenizer else None,
            },
            "strategy": report.strategy,
            "stable_prefix": {
                "tokens": report.stable_prefix.tokens if report.stable_prefix else 0,
                "sha256": report.stable_prefix.sha256 if report.stable_prefix else None,
            },
            "layers": [
                {
                    "layer": lr.layer,
                    "placement": lr.placement,
                    "blocks": lr.blocks,
                    "kept": lr.kept,
                    "tokens": lr.tokens,
                    "original_tokens": lr.original_tokens,
                }
                for lr in report.layers
            ],
            "included": included,
            "excluded": excluded,
            "warnings": warnings,
            "timings_ms": dict(report.timings_ms),
        }
    }


def dump_yaml(data: Any, indent: int = 0) -> str:
    """A small YAML emitter for plain data; strings are quoted as JSON (valid YAML) when needed."""
    return "\n".join(_yaml_lines(data, indent)) + "\n"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    plain = (
        text
        and text.strip() == text
        and not any(c in text for c in ":#{}[],&*!|>'\"%@`\n")
        and text.lower() not in ("null", "true", "false", "yes", "no", "~")
        and not text[0].isdigit()
        and text[0] not in "-?"
    )
    return text if plain else json.dumps(text, ensure_ascii=False)


def _yaml_lines(data: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(data, dict):
        if not data:
            return [pad + "{}"]
        for key, value in data.items():
            if isinstance(value, dict | list) and value:
                lines.append(f"{pad}{_scalar(key)}:")
                lines.extend(_yaml_lines(value, indent + 2))
            else:
                lines.append(f"{pad}{_scalar(key)}: {_inline(value)}")
        return lines
    if isinstance(data, list):
        if not data:
            return [pad + "[]"]
        for value in data:
            if isinstance(value, dict) and value:
                sub = _yaml_lines(value, indent + 2)
                lines.append(f"{pad}- {sub[0].lstrip()}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_inline(value)}")
        return lines
    return [pad + _scalar(data)]


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)


def render_text(ctx: AssembledContext) -> str:
    """The assembled context as a person reads it: system prompt, history, current message."""
    out = ["=== system prompt ===", ctx.system_prompt or "(empty)", ""]
    out.append(f"=== history ({len(ctx.history)} messages) ===")
    out.extend(_message_text(m) for m in ctx.history)
    out += ["", "=== current message ===", _message_text(ctx.current_message), ""]
    b = ctx.token_budget
    out.append(
        f"=== budget: {b.used.total} of {b.available} tokens used "
        f"(system {b.used.system_prompt}, history {b.used.history}, event {b.used.event}); "
        f"{b.remaining} remaining ==="
    )
    return "\n".join(out)


def _message_text(message: Message) -> str:
    parts = []
    for p in message.content:
        if isinstance(p, TextPart):
            parts.append(p.text)
        elif isinstance(p, ToolCallPart):
            parts.append(f"[tool call {p.id}] {p.name}({json.dumps(p.arguments, sort_keys=True)})")
        elif isinstance(p, ToolResultPart):
            parts.append(f"[tool result {p.call_id}{' error' if p.is_error else ''}] {p.content}")
        else:
            parts.append("[image]")
    return f"[{message.role}] " + "\n".join(parts)

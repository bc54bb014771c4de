"""Human-facing renderings of an assembled context: the working-set protocol's YAML report and a text view."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from lamina.model.context import AssembledContext
from lamina.model.messages import Message, TextPart, ToolCallPart, ToolResultPart
from lamina.wording import counted


def report_document(ctx: AssembledContext) -> dict[str, Any]:
    """The report in the working-set protocol's shape (budget, included, excluded, warnings), plus layers,
    tokenizer, stable prefix and timings. Blocks fitting dropped are one ``excluded`` entry per
    layer (``first … last``, with how many) unless the report is verbose."""
    report, budget = ctx.report, ctx.token_budget
    included: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    left_out = 0
    for d in report.dropped if not report.verbose else ():
        excluded.append(
            {
                "path": d.first_id if d.blocks == 1 else f"{d.first_id} … {d.last_id}",
                "layer": d.layer,
                "blocks": d.blocks,
                "tokens": d.original_tokens,
                "reason": "; ".join(d.reasons),
            }
        )
        left_out += d.blocks
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
            left_out += 1
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
    if left_out:
        warnings.append(f"{counted(left_out, 'block')} excluded")
    cut = sum(1 for b in report.blocks if b.status in ("truncated", "summarized"))
    if cut:
        warnings.append(f"{counted(cut, 'block')} truncated or summarized")
    document: dict[str, Any] = _plain(
        {
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
    )
    return document


def _plain(data: Any) -> Any:
    """``data`` with every string an exact ``str``: a plugin's string subclasses (ruamel's
    quoted strings from a manifest) are written as the text they hold."""
    if isinstance(data, str):
        return data if type(data) is str else str.__str__(data)
    if isinstance(data, dict):
        return {_plain(k): _plain(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_plain(v) for v in data]
    return data


def dump_yaml(data: Any) -> str:
    """Plain data as block-style YAML, in insertion order, through ruamel.yaml.

    A string that a YAML 1.1 or 1.2 reader would take for something else (``on``, ``.inf``,
    ``+1``, ``=``, ``<<``, ``null``) is quoted, and control characters are escaped, so every
    value reads back as exactly what was written whichever reader loads it. A document that
    holds only mappings with string keys, lists, ints, finite floats, booleans, ``None`` and
    words (``_PLAIN``) is written here without ruamel (its import and dump cost a start about
    15 ms): the same bytes, as core/tests/test_reporting_yaml.py checks against ruamel.
    """
    lines: list[str] = []
    if type(data) is dict and data and _block(data, 0, lines):
        return "\n".join(lines) + "\n"
    return _ruamel_yaml(data)


def _ruamel_yaml(data: Any) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.allow_unicode = True
    yaml.width = 4096
    yaml.representer.add_representer(str, _represent_str)
    yaml.representer.add_representer(type(None), _represent_none)
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


#: Strings written plain without ruamel: words of letters, digits and ``_.,/()+=@-`` that
#: start with a letter or ``_`` (or a dot and two of them, or a number and a space), single
#: spaces or colons between them (never ``: `` or a trailing colon), and not one of the
#: words a YAML 1.1 or 1.2 reader takes for a boolean, null or float (``_SPECIAL_WORDS``).
_PLAIN = re.compile(
    r"(?:[0-9]+ |\.(?=[A-Za-z_]{2}))?[A-Za-z_][\w.,/()+=@-]*(?:[ :][\w.,/()+=@-]+)*", re.ASCII
)
_SPECIAL_WORDS = frozenset(
    ["y", "yes", "n", "no", "true", "false", "on", "off", "null", ".inf", ".nan"]
)
#: Hex digests (lowercase, led by a digit, holding a, c, d or f: never a number, even ``1e5``
#: or ``0b1``, for either reader) are plain too.
_DIGEST = re.compile(r"(?=[0-9a-f]*[acdf])[0-9][0-9a-f]*")


def _scalar(value: Any) -> str | None:
    """``value`` as ruamel writes it in this report, or ``None`` when ruamel must write it."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is float:
        text = repr(value)
        return text if "." in text and "e" not in text and "n" not in text else None
    if kind is str:
        if _PLAIN.fullmatch(value) and value.lower() not in _SPECIAL_WORDS:
            return str(value)
        if _DIGEST.fullmatch(value):
            return str(value)
    return None


def _block(data: Any, indent: int, lines: list[str]) -> bool:
    """Append the lines of a mapping (``data``, a dict) at ``indent`` spaces, as ruamel lays
    them out (two-space mappings, lists at their key's column); ``False`` when anything in it
    needs ruamel."""
    pad = " " * indent
    for key, value in data.items():
        if type(key) is not str or _scalar(key) is None:
            return False
        if type(value) is dict and value:
            lines.append(f"{pad}{key}:")
            if not _block(value, indent + 2, lines):
                return False
        elif type(value) is list and value:
            lines.append(f"{pad}{key}:")
            if not _items(value, indent, lines):
                return False
        else:
            text = "{}" if type(value) is dict else "[]" if type(value) is list else _scalar(value)
            if text is None:
                return False
            lines.append(f"{pad}{key}: {text}")
    return True


def _items(data: list[Any], indent: int, lines: list[str]) -> bool:
    pad = " " * indent
    for value in data:
        if type(value) is dict and value:
            start = len(lines)
            if not _block(value, indent + 2, lines):
                return False
            lines[start] = f"{pad}- {lines[start][indent + 2 :]}"
        else:
            text = "{}" if type(value) is dict else _scalar(value)
            if text is None:  # a list in a list too
                return False
            lines.append(f"{pad}- {text}")
    return True


#: Characters a YAML reader may fold, drop or treat as a line break: written as escapes.
_ESCAPED = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")


def _represent_str(representer: Any, text: str) -> Any:
    if _ESCAPED.search(text):
        style: str | None = '"'
    elif _reads_as_other_than_text(text):
        style = "'"
    else:
        style = None
    return representer.represent_scalar("tag:yaml.org,2002:str", text, style=style)


def _represent_none(representer: Any, _: None) -> Any:
    return representer.represent_scalar("tag:yaml.org,2002:null", "null")


def _reads_as_other_than_text(text: str) -> bool:
    from ruamel.yaml.nodes import ScalarNode

    str_tag = "tag:yaml.org,2002:str"
    return any(r.resolve(ScalarNode, text, (True, False)) != str_tag for r in _resolvers())


@functools.cache
def _resolvers() -> tuple[Any, ...]:
    """A YAML 1.1 and a YAML 1.2 resolver, made once (each compiles its patterns)."""
    from ruamel.yaml.resolver import VersionedResolver

    return tuple(VersionedResolver(version=v) for v in ((1, 1), (1, 2)))


def render_text(ctx: AssembledContext) -> str:
    """The assembled context as a person reads it: system prompt, history, current message."""
    out = ["=== system prompt ===", ctx.system_prompt or "(empty)", ""]
    out.append(f"=== history ({counted(len(ctx.history), 'message')}) ===")
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

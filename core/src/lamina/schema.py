"""One JSON Schema (draft 2020-12) for the wire types, generated from the attrs model.

The types are what ``lamina serve`` reads and writes (and ``lamina.serde`` everywhere): the
assembly request as the service takes it, the assembled context and its report, the agent's
result, compaction, statistics, and the error shape. A property is required where the reader
must give it: for what hosts send, the fields without a default; for what the service only
writes, every field (it always writes them all). Regenerate the shipped copy with
``python -m lamina.schema docs/schema/lamina.schema.json``; a test keeps it in step.
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import re
import sys
import types
from collections.abc import Sequence
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from lamina.model.context import AssembledContext
from lamina.model.fields import SCHEMA_BOUNDS
from lamina.model.messages import PART_TAGS, Part
from lamina.model.report import AssemblyReport
from lamina.model.result import AgentResult
from lamina.plugins import PluginInfo
from lamina.records import CompactionOutcome, SessionStats
from lamina.serde import unstructure
from lamina.serve.wire import AssemblyInput, CompactionInput, Health, Problem, TurnRecorded

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:lamina:schema:wire"
#: What hosts send (and what it contains): fields with defaults may be left out.
INPUTS: tuple[type, ...] = (AssemblyInput, AgentResult, CompactionInput)
#: What the service writes.
OUTPUTS: tuple[type, ...] = (
    AssembledContext,
    AssemblyReport,
    TurnRecorded,
    CompactionOutcome,
    SessionStats,
    Health,
    PluginInfo,
    Problem,
)
#: What the service writes without its empty (``null``) fields.
SPARSE: tuple[type, ...] = (Problem,)
#: Fields that never travel as JSON.
OMITTED: dict[type, frozenset[str]] = {AssembledContext: frozenset({"model_info"})}
_COMPARE = {">=": "minimum", ">": "exclusiveMinimum", "<=": "maximum", "<": "exclusiveMaximum"}


def json_schema() -> dict[str, Any]:
    """The schema: every wire type under ``$defs``, the document valid for any root type."""
    inputs = _reachable(INPUTS)
    defs: dict[str, Any] = {}
    pending = [*INPUTS, *OUTPUTS]
    while pending:
        cls = pending.pop(0)
        if cls.__name__ in defs:
            continue
        defs[cls.__name__] = _class_schema(cls, cls in inputs, pending)
    defs["Part"] = {
        "description": "One part of a message's content, told apart by its `type`.",
        "oneOf": [{"$ref": f"#/$defs/{c.__name__}"} for c in PART_TAGS],
    }
    return {
        "$schema": DIALECT,
        "$id": SCHEMA_ID,
        "title": "Lamina wire types",
        "description": "The JSON lamina serve reads and writes, generated from the attrs model.",
        "anyOf": [{"$ref": f"#/$defs/{c.__name__}"} for c in (*INPUTS, *OUTPUTS)],
        "$defs": dict(sorted(defs.items())),
    }


def _reachable(roots: tuple[type, ...]) -> set[type]:
    seen: set[type] = set()
    pending = list(roots)
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for f in _fields(cls):
            pending.extend(_classes_in(f.type))
    return seen


def _classes_in(tp: Any) -> list[type]:
    if attrs.has(tp):
        return [tp]
    return [c for arg in get_args(tp) for c in _classes_in(arg)]


def _fields(cls: type) -> list[attrs.Attribute[Any]]:
    attrs.resolve_types(cls)
    omitted = OMITTED.get(cls, frozenset())
    return [f for f in attrs.fields(cls) if f.name not in omitted and f.init]


def _class_schema(cls: type, is_input: bool, pending: list[type]) -> dict[str, Any]:
    notes = _field_notes(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    tag = PART_TAGS.get(cls)
    if tag is not None:
        props["type"] = {"const": tag}
        required.append("type")
    for f in _fields(cls):
        prop = _type_schema(f.type, pending)
        prop.update(_constraints(f.validator))
        if f.name in notes:
            prop = {"description": _markdown(notes[f.name]), **prop}
        default = _default(f)
        if default is not _NO_DEFAULT and is_input:
            prop["default"] = default
        props[f.name] = prop
        if f.default is attrs.NOTHING or not (is_input or cls in SPARSE):
            required.append(f.name)
    out: dict[str, Any] = {"title": cls.__name__, "type": "object"}
    doc = inspect.getdoc(cls)
    if doc:
        out["description"] = _markdown(" ".join(doc.split("\n\n")[0].split()))
    out.update(properties=props, required=required, additionalProperties=False)
    return out


def _type_schema(tp: Any, pending: list[type]) -> dict[str, Any]:
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if tp is Any:
        return {}
    if tp in simple:
        return {"type": simple[tp]}
    if tp is type(None):
        return {"type": "null"}
    if tp is dt.datetime:
        return {"type": "string", "format": "date-time"}
    if tp == Part:
        pending.extend(PART_TAGS)
        return {"$ref": "#/$defs/Part"}
    if attrs.has(tp):
        pending.append(tp)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        kinds = {type(a) for a in args}
        out: dict[str, Any] = {"enum": list(args)}
        return {"type": "string", **out} if kinds == {str} else out
    if origin in (Union, types.UnionType):
        return {"anyOf": [_type_schema(a, pending) for a in args]}
    if origin in (tuple, list, Sequence):
        return {"type": "array", "items": _type_schema(args[0], pending)}
    if origin is dict:
        value = _type_schema(args[1], pending) if args else {}
        return {"type": "object", **({"additionalProperties": value} if value else {})}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _constraints(validator: Any) -> dict[str, Any]:
    """Bounds and choices from attrs' own validators (``ge``, ``gt``, ``in_``, …)."""
    out: dict[str, Any] = {}
    if validator is None:
        return out
    for check, key, bound in SCHEMA_BOUNDS:  # (validators may be lists: compared by identity)
        if validator is check:
            out[key] = bound
    for inner in getattr(validator, "_validators", None) or ():
        out.update(_constraints(inner))
    if hasattr(validator, "validator"):  # optional(...)
        inner = validator.validator
        for v in inner if isinstance(inner, list | tuple) else (inner,):
            out.update(_constraints(v))
    op = getattr(validator, "compare_op", None)
    if op in _COMPARE:
        out[_COMPARE[op]] = validator.bound
    options = getattr(validator, "options", None)
    if isinstance(options, tuple | list | frozenset | set):
        out["enum"] = sorted(options)
    return out


_NO_DEFAULT = object()


def _default(f: attrs.Attribute[Any]) -> Any:
    """A field's default as JSON, when it is plain data (not a nested object)."""
    value: Any = f.default
    if value is attrs.NOTHING:
        return _NO_DEFAULT
    if isinstance(value, attrs.Factory):  # type: ignore[arg-type]
        if value.takes_self:
            return _NO_DEFAULT
        value = value.factory()
    if attrs.has(type(value)):
        return _NO_DEFAULT
    return unstructure(value)


def _markdown(text: str) -> str:
    """Docstring markup (``code``) as Markdown (`code`)."""
    return text.replace("``", "`")


_NOTE = re.compile(r"^\s*#:\s?(.*)$")
_FIELD = re.compile(r"^\s*(\w+)\s*:")


def _field_notes(cls: type) -> dict[str, str]:
    """The ``#:`` comments right above each field in the class's source."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    notes: dict[str, str] = {}
    pending: list[str] = []
    for line in lines:
        note = _NOTE.match(line)
        if note:
            pending.append(note[1])
            continue
        field = _FIELD.match(line)
        if field and pending:
            notes[field[1]] = " ".join(" ".join(pending).split())
        pending = []
    return notes


def render() -> str:
    """The schema as the file shipped in docs/schema/ holds it."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    """``python -m lamina.schema [FILE]``: write the schema to FILE (or print it)."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        with open(args[0], "w", encoding="utf-8", newline="\n") as out:
            out.write(render())
    else:
        sys.stdout.write(render())


if __name__ == "__main__":
    main()

"""JSON for the data model through one private cattrs converter that rejects unknown keys."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar, get_args, get_origin

import cattrs
from attrs import resolve_types
from cattrs.errors import IterableValidationError, IterableValidationNote
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter
from cattrs.strategies import configure_tagged_union

from lamina.errors import SerdeError
from lamina.model.context import AssembledContext
from lamina.model.messages import PART_TAGS, Part
from lamina.records import ModelInfo

T = TypeVar("T")

_converter = make_converter(forbid_extra_keys=True)


_PART_CLASSES = {tag: cls for cls, tag in PART_TAGS.items()}


def _structure_part(value: Any) -> Any:
    """A part by its ``type`` tag; an unknown or missing tag says which ones exist."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a part (an object with a 'type'), got {type(value).__name__}")
    tag = value.get("type")
    cls = _PART_CLASSES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        known = ", ".join(sorted(_PART_CLASSES))
        raise ValueError(f"unknown part type {tag!r}; expected one of {known}")
    return _converter.structure({k: v for k, v in value.items() if k != "type"}, cls)


_FIELD_MESSAGE = re.compile(r"^'(?P<field>\w+)' (?P<rest>.*) @ (?P<path>\S+)$", re.S)


def _at_field(error: str) -> str:
    """attrs validators fail at the class; point the path at the field they name
    (``'share' must be <= 1.0: 1.5 @ $.layers`` → ``must be <= 1.0: 1.5 @ $.layers.share``)."""
    m = _FIELD_MESSAGE.match(error)
    if m is None:
        return error
    return f"{m['rest']} @ {m['path']}.{m['field']}"


def _is_sequence(cls: Any) -> bool:
    origin: Any = get_origin(cls)
    return origin is tuple or origin is list or origin is Sequence


def _strict_sequence(cls: Any) -> Any:
    """A list where a list is expected (a string is not split into characters); element
    errors keep their index in the path. A ``Sequence`` field (immutable) gets a tuple."""
    origin, args = get_origin(cls), get_args(cls)
    if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
        raise TypeError(f"only homogeneous tuples are supported, not {cls!r}")
    elem = args[0] if args else Any

    def hook(value: Any, _type: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected a list, got {type(value).__name__} {value!r}")
        structure_elem = _converter.get_structure_hook(elem)
        out, errors = [], []
        for i, item in enumerate(value):
            try:
                out.append(structure_elem(item, elem))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", []),
                    IterableValidationNote(f"Structuring {cls!r} @ index {i}", i, elem),
                ]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {cls!r}", errors, cls)
        return out if origin is list else tuple(out)  # (an immutable Sequence: a tuple)

    return hook


def _strict(value: Any, kind: type | tuple[type, ...]) -> Any:
    """No silent coercion: ``"3"`` is not an int and ``1`` is not a string or a bool."""
    if isinstance(value, bool) and kind is not bool:
        raise TypeError(f"expected {_kind_name(kind)}, got a boolean")
    if not isinstance(value, kind):
        raise TypeError(f"expected {_kind_name(kind)}, got {type(value).__name__} {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return names.get(kinds[-1], " or ".join(k.__name__ for k in kinds))


def _describe(exc: BaseException, _type: Any) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown keys {sorted(exc.extra_fields)}"
    if str(exc):
        return str(exc)
    return f"invalid value ({type(exc).__name__})"


def _parse_datetime(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise TypeError(f"expected an ISO 8601 string, got {type(value).__name__}")
    return datetime.fromisoformat(value)


def unstructure(obj: Any, as_type: Any = None) -> Any:
    """Plain JSON-ready data (dicts, lists, str, numbers) for a model object; ``as_type``
    names the declared type when the object's own is not enough (``tuple[Part, ...]`` keeps
    each part's ``type`` tag)."""
    return _converter.unstructure(obj, unstructure_as=as_type)


def structure(data: Any, cls: type[T], *, file: str | None = None, what: str | None = None) -> T:
    """Build ``cls`` from plain data; every problem is reported with its path (``$.event.time``)."""
    try:
        return _converter.structure(data, cls)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        if isinstance(exc, cattrs.BaseValidationError):
            errors = [
                _at_field(e)
                for e in cattrs.transform_error(exc, path="$", format_exception=_describe)
            ]
        else:
            errors = [f"{exc} @ $"]
        raise SerdeError(errors, file=file, what=what or cls.__name__) from exc


def to_json(obj: Any, *, indent: int | None = None) -> str:
    """Deterministic JSON text for a model object (keys in field order, UTF-8 kept as is)."""
    return json.dumps(unstructure(obj), indent=indent, ensure_ascii=False)


def from_json(text: str | bytes, cls: type[T], *, file: str | None = None) -> T:
    """Parse JSON text into ``cls``; malformed JSON and unknown keys are a ``SerdeError``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerdeError([f"not JSON: {exc}"], file=file, what=cls.__name__) from exc
    return structure(data, cls, file=file)


def rebase_errors(errors: list[str], prefix: str) -> list[str]:
    """``… @ $.fit.strategy`` → ``… at key <prefix>.fit.strategy`` for config-file messages."""
    out = []
    for error in errors:
        message, sep, path = error.rpartition(" @ ")
        if not sep:
            out.append(error)
            continue
        path = re.sub(r"\['([^'\]]+)'\]", r".\1", path.removeprefix("$")).lstrip(".")
        key = ".".join(k for k in (prefix, path) if k)
        out.append(f"{message} at key {key}" if key else f"{message} at the top level")
    return out


_converter.register_unstructure_hook(datetime, lambda d: d.isoformat())
_converter.register_structure_hook(datetime, lambda v, _: _parse_datetime(v))
_converter.register_structure_hook(str, lambda v, _: _strict(v, str))
_converter.register_structure_hook(int, lambda v, _: _strict(v, int))
_converter.register_structure_hook(float, lambda v, _: float(_strict(v, (int, float))))
_converter.register_structure_hook(bool, lambda v, _: _strict(v, bool))
_converter.register_structure_hook_factory(_is_sequence, _strict_sequence)
configure_tagged_union(
    Part,
    _converter,
    tag_generator=lambda cls: PART_TAGS[cls],
    tag_name="type",
)
_converter.register_structure_hook(Part, lambda v, _: _structure_part(v))

# The model info an assembled context carries is for adapters in the same process: it holds
# callables and never travels as JSON. Its hooks are made when first asked for (making them
# costs a start about 5 ms, and a command printing text never needs them).
resolve_types(AssembledContext, localns={"ModelInfo": ModelInfo})


def _is_context(cls: Any) -> bool:
    return cls is AssembledContext


def _context_unstructure(_: Any) -> Any:
    return make_dict_unstructure_fn(AssembledContext, _converter, model_info=override(omit=True))


def _context_structure(_: Any) -> Any:
    return make_dict_structure_fn(
        AssembledContext,
        _converter,
        model_info=override(omit=True),
        _cattrs_forbid_extra_keys=True,
    )


_converter.register_unstructure_hook_factory(_is_context, _context_unstructure)
_converter.register_structure_hook_factory(_is_context, _context_structure)

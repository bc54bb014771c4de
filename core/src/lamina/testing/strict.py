"""A strict checker of plain JSON data against a provider SDK's request type.

``strict_check(type_)`` checks data against a ``TypedDict`` (or a pydantic model, found by its
``model_fields``) recursively, rejecting keys the type does not declare: a plain pydantic
``TypeAdapter`` ignores unknown keys in TypedDicts and validates nested iterables lazily, so it
alone cannot prove a payload is what the SDK declares.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

__all__ = ["StrictTypeError", "strict_check"]


class StrictTypeError(AssertionError):
    """A payload does not match the declared request type; ``path`` says where."""

    def __init__(self, path: str, message: str, *, tag: bool = False) -> None:
        super().__init__(f"{path or '<root>'}: {message}")
        self.path = path
        #: a literal tag (``type``, ``role``…) did not match: the wrong alternative of a union
        self.tag = tag


def strict_check(type_: Any) -> Callable[[Any], None]:
    """A function raising ``StrictTypeError`` unless its argument matches ``type_`` exactly:
    declared keys only, required keys present, literals, scalars, lists and unions."""

    def check(value: Any) -> None:
        _check(value, type_, "")

    return check


def _strip(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """Drop ``Annotated``/``Required``/``NotRequired``/``ReadOnly`` wrappers; keep metadata."""
    meta: tuple[Any, ...] = ()
    while True:
        origin = get_origin(tp)
        name = getattr(origin, "_name", None) or getattr(origin, "__name__", None)
        if origin is typing.Annotated or name == "Annotated" or hasattr(tp, "__metadata__"):
            meta += tuple(getattr(tp, "__metadata__", ()))
            tp = tp.__origin__ if hasattr(tp, "__metadata__") else get_args(tp)[0]
        elif name in ("Required", "NotRequired", "ReadOnly"):
            tp = get_args(tp)[0]
        else:
            return tp, meta


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and hasattr(tp, "__required_keys__") and hasattr(tp, "__total__")


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and isinstance(getattr(tp, "model_fields", None), dict)


def _alias(meta: tuple[Any, ...], key: str) -> str:
    for item in meta:
        alias = getattr(item, "alias", None)
        if isinstance(alias, str):
            return alias
    return key


def _check(value: Any, tp: Any, path: str) -> None:
    tp, _ = _strip(tp)
    if tp is Any or tp is object:
        return
    if isinstance(tp, typing.TypeVar | typing.ForwardRef | str):
        return
    if getattr(tp, "__value__", None) is not None and type(tp).__name__ == "TypeAliasType":
        _check(value, tp.__value__, path)
        return
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        _check_union(value, args, path)
    elif origin is Literal:
        if value not in args or type(value) not in {type(a) for a in args}:
            raise StrictTypeError(path, f"{value!r} is not one of {list(args)}")
    elif _is_typeddict(tp):
        _check_typeddict(value, tp, path)
    elif _is_model(tp):
        _check_model(value, tp, path)
    elif origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        if not isinstance(value, dict):
            raise StrictTypeError(path, f"expected an object, got {type(value).__name__}")
        if len(args) == 2:
            for key, item in value.items():
                _check(key, args[0], f"{path}.{key}")
                _check(item, args[1], f"{path}.{key}")
    elif origin in (list, tuple, Sequence, Iterable, typing.Iterable, typing.Sequence) or tp in (
        list,
        tuple,
    ):
        if not isinstance(value, list | tuple):
            raise StrictTypeError(path, f"expected a list, got {type(value).__name__}")
        item_type = args[0] if args else Any
        for i, item in enumerate(value):
            _check(item, item_type, f"{path}[{i}]")
    elif tp is type(None):
        if value is not None:
            raise StrictTypeError(path, f"expected null, got {value!r}")
    else:
        _check_scalar(value, tp, path)


def _check_scalar(value: Any, tp: Any, path: str) -> None:
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is bytes:
        ok = isinstance(value, bytes | str)
    elif isinstance(tp, type):
        ok = isinstance(value, tp) or (
            # a pydantic model field typed as a class we cannot check from JSON (Path, bytes…)
            not tp.__module__.startswith("builtins") and isinstance(value, str)
        )
    else:
        ok = True
    if not ok:
        raise StrictTypeError(path, f"expected {getattr(tp, '__name__', tp)}, got {value!r}")


def _check_union(value: Any, args: tuple[Any, ...], path: str) -> None:
    errors: list[StrictTypeError] = []
    for option in args:
        try:
            _check(value, option, path)
            return
        except StrictTypeError as exc:
            errors.append(exc)
    # the alternative that got furthest explains best; a mismatched tag means the
    # alternative was never the intended one
    deepest = max(errors, key=lambda e: (not e.tag, len(e.path)))
    if len(errors) == 1 or "matches no alternative" in str(deepest):
        raise deepest
    raise StrictTypeError(
        deepest.path,
        f"matches no alternative; closest: {deepest}",
        tag=all(e.tag for e in errors),
    )


def _check_typeddict(value: Any, tp: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise StrictTypeError(path, f"expected an object ({tp.__name__}), got {value!r}")
    hints = typing.get_type_hints(tp, include_extras=True)
    by_wire = {_alias(_strip(h)[1], k): (k, h) for k, h in hints.items()}
    for wire, (_, hint) in by_wire.items():  # literal tags first: they say which type was meant
        if wire in value and get_origin(_strip(hint)[0]) is Literal:
            try:
                _check(value[wire], hint, f"{path}.{wire}")
            except StrictTypeError as exc:
                raise StrictTypeError(exc.path, str(exc).split(": ", 1)[1], tag=True) from None
    for key in value:
        if key not in by_wire:
            raise StrictTypeError(
                f"{path}.{key}", f"key not declared by {tp.__name__} (declared: {sorted(by_wire)})"
            )
    for wire, (key, hint) in by_wire.items():
        if wire in value:
            _check(value[wire], hint, f"{path}.{wire}")
        elif _required(tp, key, hint):
            raise StrictTypeError(f"{path}.{wire}", f"required by {tp.__name__} but missing")


def _required(tp: Any, key: str, hint: Any) -> bool:
    """Whether a TypedDict key is required. ``__required_keys__`` misses ``Required[...]``
    written as a postponed (string) annotation, so the resolved hint is asked as well."""
    marks = set()
    while True:
        origin = get_origin(hint)
        name = getattr(origin, "_name", None) or getattr(origin, "__name__", None)
        if hasattr(hint, "__metadata__"):
            hint = hint.__origin__
        elif name in ("Required", "NotRequired", "ReadOnly"):
            marks.add(name)
            hint = get_args(hint)[0]
        else:
            break
    if "Required" in marks:
        return True
    if "NotRequired" in marks:
        return False
    return key in tp.__required_keys__


def _check_model(value: Any, tp: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise StrictTypeError(path, f"expected an object ({tp.__name__}), got {value!r}")
    generator = (getattr(tp, "model_config", None) or {}).get("alias_generator")
    by_wire: dict[str, Any] = {}
    for name, info in tp.model_fields.items():
        by_wire[name] = info
        alias = info.alias or (generator(name) if callable(generator) else None)
        if alias:
            by_wire[alias] = info
    for key, item in value.items():
        if key not in by_wire:
            raise StrictTypeError(
                f"{path}.{key}", f"key not declared by {tp.__name__} (declared: {sorted(by_wire)})"
            )
        _check(item, by_wire[key].annotation, f"{path}.{key}")
    for name, info in tp.model_fields.items():
        alias = info.alias or (generator(name) if callable(generator) else name)
        if info.is_required() and name not in value and alias not in value:
            raise StrictTypeError(f"{path}.{alias}", f"required by {tp.__name__} but missing")

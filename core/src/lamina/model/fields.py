"""Checks and conversions for the fields of the model's classes that are made on every
request (blocks, budgets): plain functions, where attrs' validator and converter objects
would run through several calls of attrs' own code per field."""

from __future__ import annotations

from typing import Any

from attrs import Attribute

from lamina.model.text import clean


def non_negative(_inst: object, attr: Attribute[Any], value: int) -> None:
    """``validators.ge(0)``, with its message."""
    if value < 0:
        raise ValueError(f"'{attr.name}' must be >= 0: {value}")


def non_negative_or_none(_inst: object, attr: Attribute[Any], value: int | None) -> None:
    """``validators.optional(validators.ge(0))``, with its message."""
    if value is not None:
        non_negative(_inst, attr, value)


def cleaned_or_none(value: str | None) -> str | None:
    """``converters.optional(clean)``: a title or tag cleaned of hostile characters."""
    return None if value is None else clean(value)


#: The JSON Schema bound each check above stands for (read by ``lamina.schema``, as it reads
#: attrs' own validators' bounds).
SCHEMA_BOUNDS: tuple[tuple[object, str, int], ...] = (
    (non_negative, "minimum", 0),
    (non_negative_or_none, "minimum", 0),
)

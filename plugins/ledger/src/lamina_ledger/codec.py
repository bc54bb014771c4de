"""JSON for message content parts as the ledger stores them (``messages.content_json``)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lamina import Part, SerdeError, structure, unstructure

PARTS = tuple[Part, ...]


def dump_parts(parts: tuple[Part, ...]) -> str:
    """``content_json`` text for a message's parts (each tagged with its ``type``)."""
    return json.dumps(unstructure(parts, PARTS), ensure_ascii=False, sort_keys=True)


def parts_hash(content_json: str) -> str:
    """A message's content hash: sha256 of its ``content_json`` (computed once, when written,
    or when a row written before hashes were stored is first read)."""
    return hashlib.sha256(content_json.encode("utf-8", "surrogatepass")).hexdigest()


def load_parts(text: str) -> tuple[Part, ...]:
    """Parts back from ``content_json``; ``ValueError`` says what is wrong with it."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"content_json is not valid JSON ({exc})") from exc
    if not isinstance(data, list):
        raise ValueError(f"content_json must be a list of parts, got {type(data).__name__}")
    try:
        parts: tuple[Part, ...] = structure(data, PARTS, what="content_json")
    except SerdeError as exc:
        raise ValueError("; ".join(exc.errors)) from exc
    return parts


def load_context(text: str | None) -> dict[str, Any] | None:
    """``context_json`` back (``None`` stays ``None``)."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"context_json is not valid JSON ({exc})") from exc
    if data is not None and not isinstance(data, dict):
        raise ValueError("context_json must be an object")
    return data

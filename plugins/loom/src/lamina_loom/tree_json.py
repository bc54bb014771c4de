"""The JSON export format of one tree (``{"format": "lamina-loom/1", "tree": {...}}``): how a
host hands Lamina a tree from its own store, and how the stores build a checked ``Tree`` from
plain data."""

from __future__ import annotations

import json
from typing import Any

from lamina import SerdeError, structure, unstructure
from lamina_loom.errors import LoomError
from lamina_loom.model import Tree

JSON_FORMAT = "lamina-loom/1"


def tree_to_data(tree: Tree) -> dict[str, Any]:
    """The JSON export document of ``tree``."""
    data = unstructure(tree)
    return {"format": JSON_FORMAT, "tree": data}


def tree_to_json(tree: Tree, *, indent: int | None = 2) -> str:
    """``tree`` as export JSON text (deterministic)."""
    return json.dumps(tree_to_data(tree), indent=indent, ensure_ascii=False)


def tree_from_data(data: Any, *, file: str | None = None) -> Tree:
    """Build a tree from an export document; every problem names its path (``$.tree.nodes[2]``)."""
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise LoomError(
            f"not a loom tree export: expected format {JSON_FORMAT!r}, got {found!r}", file=file
        )
    extra = sorted(set(data) - {"format", "tree"})
    if extra:
        raise LoomError(f"unknown keys {extra} in the export document", file=file)
    return build_tree(data.get("tree"), file=file)


def build_tree(data: Any, *, file: str | None = None, what: str = "loom tree") -> Tree:
    """Structure plain data into a checked ``Tree``: shape errors are a ``SerdeError`` with
    paths, tree errors (a cycle, an edge to nowhere) a ``LoomError``; both name ``file``."""
    try:
        return structure(data, Tree, file=file, what=what)
    except SerdeError as exc:
        cause = _loom_cause(exc.__cause__)
        if cause is not None:
            raise LoomError(str(cause), file=file) from cause
        raise


def _loom_cause(exc: BaseException | None) -> LoomError | None:
    """The ``LoomError`` a structuring failure wraps (cattrs groups errors), if any."""
    if isinstance(exc, LoomError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _loom_cause(inner)
        if found is not None:
            return found
    return None


def tree_from_json(text: str | bytes, *, file: str | None = None) -> Tree:
    """Parse export JSON text into a tree."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoomError(f"not JSON: {exc}", file=file) from exc
    return tree_from_data(data, file=file)


__all__ = [
    "JSON_FORMAT",
    "build_tree",
    "tree_from_data",
    "tree_from_json",
    "tree_to_data",
    "tree_to_json",
]

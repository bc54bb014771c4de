"""Where trees live: the embedded SQLite store (``sqlite_store``), trees held in memory, and an
exported tree file a host hands over (the JSON format of ``tree_json``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

from lamina_loom.errors import LoomError
from lamina_loom.model import Tree
from lamina_loom.sqlite_store import REVISION_TRIGGERS, SCHEMA, SQLiteStore
from lamina_loom.tree_json import (
    JSON_FORMAT,
    build_tree,
    tree_from_data,
    tree_from_json,
    tree_to_data,
    tree_to_json,
)


@runtime_checkable
class TreeStore(Protocol):
    """Anything that can hand over a tree by id (a host may implement its own)."""

    def load(self, tree_id: str) -> Tree: ...


class MemoryStore:
    """Trees held in a dict; ``from_json_file`` reads one export file once."""

    def __init__(self, trees: list[Tree] | tuple[Tree, ...] = ()) -> None:
        self._trees = {t.id: t for t in trees}

    @classmethod
    def from_json_file(cls, path: str | Path) -> MemoryStore:
        p = Path(path)
        return cls([tree_from_json(_read_file(p), file=str(p))])

    def save(self, tree: Tree) -> None:
        self._trees[tree.id] = tree

    def load(self, tree_id: str) -> Tree:
        return _only(self._trees, tree_id)

    def tree_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._trees))


class TreeFile:
    """One exported tree in a file (read-only), read again on every load so an edit to the
    file is seen; while its bytes are the same, the tree decoded from them is reused."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._read: tuple[bytes, Tree] | None = None
        #: How many times the file was decoded (what reusing the tree saves).
        self.decoded = 0
        self.load_any()  # a missing or broken file is an error when it is opened

    def load_any(self) -> Tree:
        """The file's tree, whatever its id."""
        data = _read_file(self.path)
        with self._lock:
            if self._read is not None and self._read[0] == data:
                return self._read[1]
            tree = tree_from_json(data, file=str(self.path))
            self._read, self.decoded = (data, tree), self.decoded + 1
            return tree

    def load(self, tree_id: str) -> Tree:
        tree = self.load_any()
        return _only({tree.id: tree}, tree_id, file=str(self.path))

    def tree_ids(self) -> tuple[str, ...]:
        return (self.load_any().id,)


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise LoomError(f"cannot read tree file: {exc.strerror}", file=str(path)) from exc


def _only(trees: dict[str, Tree], tree_id: str, *, file: str | None = None) -> Tree:
    found = trees.get(tree_id)
    if found is None:
        raise LoomError(
            f"no tree {tree_id!r} in the store; known: {', '.join(sorted(trees)) or 'none'}",
            file=file,
        )
    return found


def open_store(path: str | Path) -> SQLiteStore | TreeFile:
    """A store for ``path``: ``.json`` is one exported tree (read-only), anything else SQLite."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        return TreeFile(p)
    return SQLiteStore(p)


__all__ = [
    "JSON_FORMAT",
    "REVISION_TRIGGERS",
    "SCHEMA",
    "MemoryStore",
    "SQLiteStore",
    "TreeFile",
    "TreeStore",
    "build_tree",
    "open_store",
    "tree_from_data",
    "tree_from_json",
    "tree_to_data",
    "tree_to_json",
]

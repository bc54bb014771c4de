"""Lamina plugin for Loom Trees (the Loom design): dialogue-mode and buffer-mode context assembly
from a path through a tree, with an embedded SQLite store and a JSON import/export."""

import importlib
from typing import TYPE_CHECKING, Any

from lamina_loom.errors import LoomError
from lamina_loom.model import (
    DEFAULT_PREFERENCES,
    Edge,
    EdgeSource,
    Node,
    NodeImage,
    NodeMetadata,
    NodeVersion,
    Preferences,
    Tree,
)
from lamina_loom.plugin import LoomPlugin
from lamina_loom.settings import OperationalMemory, Settings, Stash
from lamina_loom.store import (
    REVISION_TRIGGERS,
    SCHEMA,
    MemoryStore,
    SQLiteStore,
    TreeFile,
    TreeStore,
    open_store,
    tree_from_json,
    tree_to_json,
)

__all__ = [
    "DEFAULT_PREFERENCES",
    "REVISION_TRIGGERS",
    "SCHEMA",
    "BufferResult",
    "DialogueResult",
    "Edge",
    "EdgeSource",
    "Loom",
    "LoomError",
    "LoomPlugin",
    "MemoryStore",
    "Node",
    "NodeImage",
    "NodeMetadata",
    "NodeVersion",
    "OperationalMemory",
    "Preferences",
    "SQLiteStore",
    "Settings",
    "Stash",
    "Tree",
    "TreeFile",
    "TreeStore",
    "assemble_buffer",
    "assemble_dialogue",
    "open_store",
    "tree_from_json",
    "tree_to_json",
]

if TYPE_CHECKING:
    from lamina_loom.api import DialogueResult, Loom, assemble_buffer, assemble_dialogue
    from lamina_loom.buffer import BufferResult

#: The API's names, imported on first use: loading the plugin (its entry point is
#: ``lamina_loom.plugin``, which imports this package) does not need them.
_LAZY = {
    "DialogueResult": "lamina_loom.api",
    "Loom": "lamina_loom.api",
    "assemble_buffer": "lamina_loom.api",
    "assemble_dialogue": "lamina_loom.api",
    "BufferResult": "lamina_loom.buffer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lamina_loom' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

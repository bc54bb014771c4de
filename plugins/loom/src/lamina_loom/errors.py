"""The plugin's error: bad tree data or a bad selection, naming the tree (and file)."""

from __future__ import annotations

from lamina import ConfigError


class LoomError(ConfigError):
    """A Loom Tree that cannot be assembled: a cycle, a missing node, an edge to nowhere, a
    current position not in the tree, nothing left to send. Names the tree and the file."""

    def __init__(
        self,
        message: str,
        *,
        tree: str | None = None,
        file: str | None = None,
        key: str | None = None,
    ) -> None:
        self.tree = tree
        super().__init__(f"loom tree {tree!r}: {message}" if tree else message, file=file, key=key)

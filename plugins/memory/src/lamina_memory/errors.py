"""The memory plugin's own error: a store that cannot be opened or reached, or data it refuses."""

from __future__ import annotations

from lamina import LaminaError


class MemoryStoreError(LaminaError):
    """A store that cannot be opened or reached, or data it refuses; names the plugin, the store
    (its URL without a password) and, for refused data, the memory and the field."""

    def __init__(self, message: str) -> None:
        super().__init__(f"plugin 'memory': {message}")

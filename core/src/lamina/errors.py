"""Lamina's exceptions and warnings. Each names its cause: the plugin, the file, the field."""

from __future__ import annotations


class LaminaError(Exception):
    """Base of every error Lamina raises on purpose. ``plugin``: the plugin whose call raised
    it, when known (the kernel sets it on a required provider's error); its message then
    starts with ``plugin 'NAME': ``."""

    #: Exit status the CLI uses for this kind of error.
    exit_code = 1
    plugin: str | None = None

    def __str__(self) -> str:
        said = super().__str__()
        if self.plugin is None or said.startswith(f"plugin {self.plugin!r}"):
            return said
        return f"plugin {self.plugin!r}: {said}"


class ConfigError(LaminaError, ValueError):
    """Bad configuration or bad input data: names the file, the key path and what was expected."""

    exit_code = 2

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None) -> None:
        self.file = file
        self.key = key
        where = ", ".join(x for x in (file, f"key {key}" if key else None) if x)
        super().__init__(f"{where}: {message}" if where else message)


class SerdeError(ConfigError):
    """Data that does not match the model; ``errors`` lists each problem with its path."""

    def __init__(self, errors: list[str], *, file: str | None = None, what: str = "data") -> None:
        self.errors = errors
        super().__init__(f"invalid {what}: " + "; ".join(errors), file=file)


class PluginError(LaminaError):
    """A plugin that could not load, returned a bad record, clashed with another, or failed."""

    exit_code = 2

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        self.plugin = plugin
        super().__init__(f"plugin {plugin!r}: {message}" if plugin else message)


class ProviderError(PluginError):
    """A required layer provider raised or timed out."""

    exit_code = 1


class BudgetError(LaminaError):
    """The budget cannot be met without cutting what must not be cut; ``overage`` says by how much."""

    exit_code = 3

    def __init__(self, message: str, *, overage: int, available: int) -> None:
        self.overage = overage
        self.available = available
        super().__init__(message)


class LaminaWarning(UserWarning):
    """Something degraded but assembly went on (an optional plugin failed, a file was skipped)."""

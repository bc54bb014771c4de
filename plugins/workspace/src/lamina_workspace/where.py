"""Where a configured workspace keeps its files: the root, the working-set manifest and the
change log, checked once when the config is read."""

from __future__ import annotations

from pathlib import Path

from attrs import frozen

from lamina import ConfigError, LaminaConfig, structure
from lamina_workspace.beneath import FileRefused, check_relative
from lamina_workspace.settings import NAME, Settings


@frozen(kw_only=True)
class Workspace:
    """A working set's files: ``manifest`` and ``log`` are paths relative to ``root``, and
    every access to them goes through the walk beneath ``root``."""

    root: Path
    manifest: str = "working-set.yml"
    log: str = ".lamina/working-set.log.jsonl"

    def __attrs_post_init__(self) -> None:
        for key in ("manifest", "log"):
            try:
                check_relative(getattr(self, key))
            except FileRefused as exc:
                raise ConfigError(f"{exc.path}: {exc.reason}", key=key) from exc

    @property
    def shown(self) -> str:
        """The manifest as named in messages."""
        return self.manifest

    @property
    def manifest_path(self) -> Path:
        """The manifest's path, for a host to show (never opened by this name)."""
        return self.root / self.manifest

    @property
    def log_path(self) -> Path:
        """The change log's path, for a host to show (never opened by this name)."""
        return self.root / self.log


def settings_of(config: LaminaConfig) -> Settings | None:
    """This plugin's validated settings, or ``None`` when config has no section for it."""
    raw = config.sections.get(NAME)
    if raw is None:
        return None
    return structure(raw, Settings, file=config.path, what=f"settings of plugin {NAME!r}")


def workspace_root(config: LaminaConfig, settings: Settings) -> Path:
    """The root folder, relative to the config file."""
    return config.resolve(settings.root)


def workspace_of(config: LaminaConfig, settings: Settings) -> Workspace:
    """The configured working set (``ConfigError`` naming the key when a path is not one
    inside the root); ``settings.working_set`` must be set."""
    assert settings.working_set is not None
    root = workspace_root(config, settings)
    for key, value in (("working_set", settings.working_set), ("change_log", settings.change_log)):
        try:
            check_relative(value)
        except FileRefused as exc:
            raise ConfigError(
                f"{value}: {exc.reason}", file=config.path, key=f"plugins.{NAME}.{key}"
            ) from exc
    return Workspace(root=root, manifest=settings.working_set, log=settings.change_log)

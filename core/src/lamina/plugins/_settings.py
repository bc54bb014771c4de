"""Plugin settings: each plugin's config section validated against its settings class, and
which plugins stay inert because config has no section for them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from lamina.config import LaminaConfig, is_inert_without_section
from lamina.errors import PluginError, SerdeError
from lamina.plugins._manager import LaminaPluginManager
from lamina.serde import rebase_errors, structure


def load_settings(
    pm: LaminaPluginManager, config: LaminaConfig, known: set[str], loaded: Mapping[str, bool]
) -> tuple[dict[str, Any], frozenset[str]]:
    """Validated settings by plugin name, and the plugins inert without their section.

    ``known`` is every plugin name seen (loaded or not); ``loaded`` says, per registered
    plugin, whether it loaded without error.
    """
    where = config.path or "config"
    for name in config.sections:
        if name not in known:
            names = ", ".join(sorted(known)) or "none"
            raise PluginError(
                f"has a config section ({where} key plugins.{name}) but no such plugin is "
                f"installed; known plugins: {names}",
                plugin=name,
            )
    classes = dict(pm.each("lamina_settings_class", lambda _plugin: {}))
    for name in config.sections:
        if loaded.get(name) and name not in classes:
            raise PluginError(
                f"takes no settings, but {where} has a section for it (key plugins.{name})",
                plugin=name,
            )
    settings: dict[str, Any] = {}
    inert: set[str] = set()
    for plugin, cls in classes.items():
        if cls is None:
            continue
        if is_inert_without_section(cls) and plugin not in config.sections:
            inert.add(plugin)
        if plugin not in config.sections and attrs.has(cls):
            try:  # no section: the defaults (what structuring {} gives, without its code)
                settings[plugin] = cls()
                continue
            except Exception:  # structuring says what is wrong, below
                pass
        raw = config.sections.get(plugin, {})
        try:
            settings[plugin] = structure(raw, cls, file=config.path)
        except SerdeError as exc:
            errors = rebase_errors(exc.errors, f"plugins.{plugin}")
            raise SerdeError(
                errors, file=config.path, what=f"settings of plugin {plugin!r}"
            ) from exc
        except Exception as exc:  # a settings class cattrs cannot build at all
            raise PluginError(
                f"its settings class {getattr(cls, '__name__', cls)!r} cannot be built from "
                f"config: {type(exc).__name__}: {exc}",
                plugin=plugin,
            ) from exc
    return settings, frozenset(inert)

"""Loading plugins for one configuration: built-ins, entry points, allow- and deny-lists.

Built-in defaults are ordinary plugins registered first, so any installed plugin is asked
before them. Entry points in the group ``lamina`` load next, filtered by ``LAMINA_PLUGINS``
(a comma-separated allow-list of plugin or distribution names) and by ``[plugins]`` in config.
A plugin that fails to import is reported, not fatal, unless config requires it.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Sequence
from typing import Any

import pluggy
from attrs import frozen

from lamina.config import LaminaConfig
from lamina.errors import LaminaWarning, PluginError
from lamina.log import get_logger
from lamina.plugins._installed import Installed, installed
from lamina.plugins._manager import LaminaPluginManager
from lamina.plugins._registry import COLLECTIONS, Registry, build_registry, named
from lamina.plugins._settings import load_settings
from lamina.records import ModelInfo, Tokenizer

_log = get_logger("plugins")

ENTRY_POINT_GROUP = "lamina"
ENV_ALLOW_LIST = "LAMINA_PLUGINS"
KERNEL_DISTRIBUTION = "lamina"

#: Built-in plugins, in registration order (later ones are asked first).
BUILTINS: tuple[tuple[str, str], ...] = (
    ("layers", "lamina.builtins.layers_plugin"),
    ("models", "lamina.builtins.models_plugin"),
    ("estimate", "lamina.builtins.estimate_plugin"),
    ("tiktoken", "lamina.builtins.tiktoken_plugin"),
    ("truncators", "lamina.builtins.truncators_plugin"),
    ("formatters", "lamina.builtins.formatters_plugin"),
    ("permissions", "lamina.builtins.permissions_plugin"),
    ("event", "lamina.builtins.event_plugin"),
    ("history", "lamina.builtins.history_plugin"),
    ("static", "lamina.builtins.static_plugin"),
)
#: Built-ins the pipeline cannot run without.
ESSENTIAL = frozenset({"layers", "models", "estimate"})
#: What a plugin that is inert without its config section does not get to supply.
INERT_HOOKS = frozenset(
    {"lamina_layer_providers", "lamina_block_transforms", "lamina_tool_filters"}
)


@frozen(kw_only=True)
class PluginInfo:
    """One plugin as ``lamina plugins`` shows it."""

    name: str
    distribution: str
    version: str
    builtin: bool
    hooks: tuple[str, ...] = ()
    error: str | None = None


class PluginHost:
    """Loads plugins for one configuration and resolves what they supply.

    ``extra`` registers plugin objects directly (hosts and tests): ``(name, plugin)`` pairs.
    """

    def __init__(
        self,
        config: LaminaConfig,
        *,
        extra: Sequence[tuple[str, object]] = (),
        entry_points: bool = True,
    ) -> None:
        self.config = config
        self.pm = LaminaPluginManager()
        self.infos: dict[str, PluginInfo] = {}
        self._dists: dict[str, str] = {}
        self._known: set[str] = set()
        self._failed: set[str] = set()
        self._allowed = _env_allow_list()
        found = installed(ENTRY_POINT_GROUP, KERNEL_DISTRIBUTION)
        self._register_builtins(found.kernel_version)
        if entry_points:
            self._load_entry_points(found)
        for name, plugin in extra:
            self._register(
                name, plugin, distribution="(registered by host)", version="", builtin=False
            )
        self._check_required()
        loaded = {name: info.error is None for name, info in self.infos.items()}
        self.settings, self.inert = load_settings(self.pm, config, self._known, loaded)
        self.wrap_assembly = self._without_inert("lamina_wrap_assembly")

    # -- loading -------------------------------------------------------------------------

    def _enabled(self, name: str, distribution: str | None) -> bool:
        """Deny-list for all plugins; the allow-list (``enable``) only for installed ones."""
        names = {name} | ({distribution} if distribution else set())
        cfg = self.config.plugins
        if names & set(cfg.disable):
            return False
        return distribution is None or cfg.enable is None or bool(names & set(cfg.enable))

    def _register_builtins(self, version: str) -> None:
        for name, module in BUILTINS:
            self._known.add(name)
            if not self._enabled(name, None):
                if name in ESSENTIAL:
                    raise PluginError(
                        "is essential to the kernel and cannot be disabled "
                        f"(config {self._where()} key plugins.disable)",
                        plugin=name,
                    )
                continue
            plugin = importlib.import_module(module)
            self._register(
                name, plugin, distribution=KERNEL_DISTRIBUTION, version=version, builtin=True
            )

    def _load_entry_points(self, found: Installed) -> None:
        """The group's entry points (``lamina.plugins._installed``: cached until what is
        installed changes), sorted by name."""
        seen: dict[str, str] = {}
        for ep in found.entry_points:
            dist, version = ep.distribution, ep.version
            if ep.name in seen and seen[ep.name] != dist:
                raise PluginError(
                    f"is provided by two distributions: {seen[ep.name]} and {dist}", plugin=ep.name
                )
            if ep.name in self.infos and self.infos[ep.name].builtin:
                raise PluginError(
                    f"entry point in {dist} clashes with the built-in plugin of that name",
                    plugin=ep.name,
                )
            seen[ep.name] = dist
            self._known.add(ep.name)
            if self._allowed is not None and not {ep.name, dist} & self._allowed:
                continue
            if not self._enabled(ep.name, dist):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must not stop the others
                self._fail(ep.name, dist, version, f"import failed: {type(exc).__name__}: {exc}")
                continue
            self._register(ep.name, plugin, distribution=dist, version=version, builtin=False)

    def _register(
        self, name: str, plugin: object, *, distribution: str, version: str, builtin: bool
    ) -> None:
        self._known.add(name)
        try:
            self.pm.register(plugin, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            self._fail(name, distribution, version, f"invalid plugin: {exc}")
            return
        hooks = tuple(sorted(h.name for h in self.pm.get_hookcallers(plugin) or ()))
        self.infos[name] = PluginInfo(
            name=name, distribution=distribution, version=version, builtin=builtin, hooks=hooks
        )
        self._dists[name] = distribution

    def _fail(self, name: str, distribution: str, version: str, error: str) -> None:
        self.infos[name] = PluginInfo(
            name=name, distribution=distribution, version=version, builtin=False, error=error
        )
        self._failed.add(name)
        if name in self.config.plugins.require or distribution in self.config.plugins.require:
            raise PluginError(
                f"{error} (required by {self._where()} key plugins.require)", plugin=name
            )
        _log.warning("plugin %r (%s) skipped: %s", name, distribution, error)
        warnings.warn(
            f"plugin {name!r} ({distribution}) skipped: {error}", LaminaWarning, stacklevel=3
        )

    def _check_required(self) -> None:
        for name in self.config.plugins.require:
            loaded = name in self.infos or name in self._dists.values()
            if not loaded:
                raise PluginError(
                    f"is required by {self._where()} key plugins.require but is not installed "
                    "or not enabled",
                    plugin=name,
                )

    def _where(self) -> str:
        return self.config.path or "config"

    # -- resolution ----------------------------------------------------------------------

    def distribution(self, plugin: str) -> str:
        return self._dists.get(plugin, "(unknown distribution)")

    def _kwargs(self, plugin: str, **given: Any) -> dict[str, Any]:
        return {**given, "config": self.config, "settings": self.settings.get(plugin)}

    def _without_inert(self, hook: str) -> Any:
        """The hook's caller, less the plugins that are inert without their config section."""
        if not self.inert:
            return getattr(self.pm.hook, hook)
        plugins = [self.pm.get_plugin(name) for name in self.inert]
        return self.pm.subset_hook_caller(hook, remove_plugins=plugins)

    def resolve(self) -> Registry:
        """Resolve every collection hook once, each record attributed to its plugin."""
        by_hook = {}
        for hook in COLLECTIONS:
            skip = self.inert if hook in INERT_HOOKS else ()
            answers = list(self.pm.each(hook, self._kwargs, skip))
            by_hook[hook] = named(hook, answers, self._dists)
        return build_registry(by_hook)

    def model_info(self, model: str) -> tuple[ModelInfo, str]:
        found = self.pm.first("lamina_model_info", lambda p: self._kwargs(p, model=model))
        if found is None:  # the built-in table always answers
            raise PluginError(f"no plugin knows model {model!r}")
        info, plugin = found
        if not isinstance(info, ModelInfo):
            raise PluginError(f"lamina_model_info returned {type(info).__name__}", plugin=plugin)
        return info, plugin

    def tokenizer(self, model: str, info: ModelInfo) -> tuple[Tokenizer, str]:
        found = self.pm.first("lamina_tokenizer", lambda p: self._kwargs(p, model=model, info=info))
        if found is None:
            raise PluginError(f"no plugin supplies a tokenizer for model {model!r}")
        tok, plugin = found
        if not isinstance(tok, Tokenizer):
            raise PluginError(f"lamina_tokenizer returned {type(tok).__name__}", plugin=plugin)
        return tok, plugin

    def add_commands(self, cli: Any) -> None:
        self.pm.hook.lamina_commands(cli=cli)


def _env_allow_list() -> set[str] | None:
    raw = os.environ.get(ENV_ALLOW_LIST)
    if raw is None:
        return None
    return {n.strip() for n in raw.split(",") if n.strip()}

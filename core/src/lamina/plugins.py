"""Plugin loading and resolution: built-ins, entry points, allow- and deny-lists, attribution.

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
from importlib import metadata
from typing import Any, TypeVar

import pluggy
from attrs import frozen

from lamina import hookspecs
from lamina.config import LaminaConfig, is_inert_without_section
from lamina.errors import LaminaError, LaminaWarning, PluginError, SerdeError
from lamina.records import (
    Adapter,
    BlockTransform,
    FitStrategy,
    Formatter,
    LayerProvider,
    LayerSpec,
    ModelInfo,
    Summarizer,
    Tokenizer,
    ToolFilter,
    Truncator,
)
from lamina.serde import rebase_errors, structure

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
    ("static", "lamina.builtins.static_plugin"),
)
#: Built-ins the pipeline cannot run without.
ESSENTIAL = frozenset({"layers", "models", "estimate"})

#: What a plugin that is inert without its config section does not get to supply.
INERT_HOOKS = frozenset(
    {"lamina_layer_providers", "lamina_block_transforms", "lamina_tool_filters"}
)

R = TypeVar("R")


@frozen(kw_only=True)
class PluginInfo:
    """One plugin as ``lamina plugins`` shows it."""

    name: str
    distribution: str
    version: str
    builtin: bool
    hooks: tuple[str, ...] = ()
    error: str | None = None


@frozen(kw_only=True)
class Attributed:
    """A record and the plugin (and distribution) that supplied it."""

    record: Any
    plugin: str
    distribution: str


@frozen(kw_only=True)
class Registry:
    """Every record resolved once, keyed by name; each value knows its plugin."""

    layers: dict[str, Attributed]
    providers: tuple[Attributed, ...]
    truncators: dict[str, Attributed]
    fit_strategies: dict[str, Attributed]
    formatters: dict[str, Attributed]
    summarizers: dict[str, Attributed]
    tool_filters: tuple[Attributed, ...]
    adapters: dict[str, Attributed]
    block_transforms: tuple[Attributed, ...] = ()

    def layer(self, name: str) -> LayerSpec:
        spec: LayerSpec = self.layers[name].record
        return spec


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
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.infos: dict[str, PluginInfo] = {}
        self._dists: dict[str, str] = {}
        self._known: set[str] = set()
        self._failed: set[str] = set()
        self._allowed = _env_allow_list()
        self._register_builtins()
        if entry_points:
            self._load_entry_points()
        for name, plugin in extra:
            self._register(
                name, plugin, distribution="(registered by host)", version="", builtin=False
            )
        self._check_required()
        self.inert: frozenset[str] = frozenset()
        self.settings = self._load_settings()
        self.wrap_assembly = self._without_inert("lamina_wrap_assembly")

    # -- loading -------------------------------------------------------------------------

    def _enabled(self, name: str, distribution: str | None) -> bool:
        """Deny-list for all plugins; the allow-list (``enable``) only for installed ones."""
        names = {name} | ({distribution} if distribution else set())
        cfg = self.config.plugins
        if names & set(cfg.disable):
            return False
        return distribution is None or cfg.enable is None or bool(names & set(cfg.enable))

    def _register_builtins(self) -> None:
        version = _version(KERNEL_DISTRIBUTION)
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

    def _load_entry_points(self) -> None:
        seen: dict[str, str] = {}
        for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist else "(unknown distribution)"
            version = ep.dist.version if ep.dist else ""
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

    def _load_settings(self) -> dict[str, Any]:
        for name in self.config.sections:
            if name not in self._known:
                known = ", ".join(sorted(self._known)) or "none"
                raise PluginError(
                    f"has a config section ({self._where()} key plugins.{name}) but no such "
                    f"plugin is installed; known plugins: {known}",
                    plugin=name,
                )
        settings: dict[str, Any] = {}
        takes = {impl.plugin_name for impl in self.pm.hook.lamina_settings_class.get_hookimpls()}
        for name in self.config.sections:
            if name in self.infos and not self.infos[name].error and name not in takes:
                raise PluginError(
                    f"takes no settings, but {self._where()} has a section for it "
                    f"(key plugins.{name})",
                    plugin=name,
                )
        inert = set()
        for impl in self.pm.hook.lamina_settings_class.get_hookimpls():
            cls: Any = impl.function()
            raw = self.config.sections.get(impl.plugin_name, {})
            if cls is None:
                continue
            if is_inert_without_section(cls) and impl.plugin_name not in self.config.sections:
                inert.add(impl.plugin_name)
            try:
                settings[impl.plugin_name] = structure(raw, cls, file=self.config.path)
            except SerdeError as exc:
                key = f"plugins.{impl.plugin_name}"
                errors = rebase_errors(exc.errors, key)
                raise SerdeError(
                    errors, file=self.config.path, what=f"settings of plugin {impl.plugin_name!r}"
                ) from exc
        self.inert = frozenset(inert)
        return settings

    def _without_inert(self, hook: str) -> Any:
        """The hook's caller, less the plugins that are inert without their config section."""
        if not self.inert:
            return getattr(self.pm.hook, hook)
        plugins = [self.pm.get_plugin(name) for name in self.inert]
        return self.pm.subset_hook_caller(hook, remove_plugins=plugins)

    def _where(self) -> str:
        return self.config.path or "config"

    # -- resolution ----------------------------------------------------------------------

    def distribution(self, plugin: str) -> str:
        return self._dists.get(plugin, "(unknown distribution)")

    def collect(self, hook: str, record_type: type[R]) -> list[Attributed]:
        """Call one collection hook on every plugin, in registration order, attributing records."""
        caller = getattr(self.pm.hook, hook)
        out: list[Attributed] = []
        for impl in caller.get_hookimpls():
            if hook in INERT_HOOKS and impl.plugin_name in self.inert:
                continue
            kwargs = {"config": self.config, "settings": self.settings.get(impl.plugin_name)}
            try:
                result = impl.function(*(kwargs[a] for a in impl.argnames))
                records = list(result or ())
            except LaminaError:
                raise  # already names its cause (a config key, a file)
            except Exception as exc:
                raise PluginError(
                    f"{hook} raised {type(exc).__name__}: {exc}", plugin=impl.plugin_name
                ) from exc
            for record in records:
                if not isinstance(record, record_type):
                    raise PluginError(
                        f"{hook} returned {type(record).__name__}, expected {record_type.__name__}",
                        plugin=impl.plugin_name,
                    )
                out.append(
                    Attributed(
                        record=record,
                        plugin=impl.plugin_name,
                        distribution=self.distribution(impl.plugin_name),
                    )
                )
        return out

    def _named(self, hook: str, record_type: type[R], kind: str) -> dict[str, Attributed]:
        named: dict[str, Attributed] = {}
        for item in self.collect(hook, record_type):
            name = item.record.name
            if name in named:
                first = named[name]
                raise PluginError(
                    f"two {kind}s named {name!r}: one from plugin {first.plugin!r} "
                    f"({first.distribution}), one from plugin {item.plugin!r} ({item.distribution})",
                    plugin=item.plugin,
                )
            named[name] = item
        return named

    def resolve(self) -> Registry:
        """Resolve every collection hook once."""
        providers = self._named("lamina_layer_providers", LayerProvider, "layer provider")
        filters = self._named("lamina_tool_filters", ToolFilter, "tool filter")
        return Registry(
            layers=self._named("lamina_layers", LayerSpec, "layer"),
            providers=tuple(providers.values()),
            truncators=self._named("lamina_truncators", Truncator, "truncator"),
            fit_strategies=self._named("lamina_fit_strategies", FitStrategy, "fit strategy"),
            formatters=self._named("lamina_formatters", Formatter, "formatter"),
            summarizers=self._named("lamina_summarizers", Summarizer, "summarizer"),
            tool_filters=tuple(filters.values()),
            adapters=self._named("lamina_adapters", Adapter, "adapter"),
            block_transforms=tuple(
                self._named("lamina_block_transforms", BlockTransform, "block transform").values()
            ),
        )

    def first(self, hook: str, **kwargs: Any) -> tuple[Any, str] | None:
        """Ask a first-result hook the way pluggy would, but say which plugin answered."""
        caller = getattr(self.pm.hook, hook)
        for impl in reversed(caller.get_hookimpls()):
            if impl.hookwrapper or impl.wrapper:
                continue
            given = {
                **kwargs,
                "config": self.config,
                "settings": self.settings.get(impl.plugin_name),
            }
            try:
                answer = impl.function(*(given[a] for a in impl.argnames))
            except Exception as exc:
                raise PluginError(
                    f"{hook} raised {type(exc).__name__}: {exc}", plugin=impl.plugin_name
                ) from exc
            if answer is not None:
                return answer, impl.plugin_name
        return None

    def model_info(self, model: str) -> tuple[ModelInfo, str]:
        found = self.first("lamina_model_info", model=model)
        if found is None:  # the built-in table always answers
            raise PluginError(f"no plugin knows model {model!r}")
        info, plugin = found
        if not isinstance(info, ModelInfo):
            raise PluginError(f"lamina_model_info returned {type(info).__name__}", plugin=plugin)
        return info, plugin

    def tokenizer(self, model: str, info: ModelInfo) -> tuple[Tokenizer, str]:
        found = self.first("lamina_tokenizer", model=model, info=info)
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


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""

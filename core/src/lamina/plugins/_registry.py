"""The records plugins supply, resolved once per assembler: attributed, type-checked, and
refused when two records of one kind share a name."""

from __future__ import annotations

from typing import Any, TypeVar

from attrs import frozen

from lamina.errors import PluginError
from lamina.records import (
    Adapter,
    BlockTransform,
    FitStrategy,
    Formatter,
    LayerProvider,
    LayerSpec,
    SessionStore,
    Summarizer,
    ToolFilter,
    Truncator,
)

R = TypeVar("R")


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
    session_stores: tuple[Attributed, ...] = ()

    def layer(self, name: str) -> LayerSpec:
        spec: LayerSpec = self.layers[name].record
        return spec


#: Each collection hook: its record type and what one record is called in errors.
COLLECTIONS: dict[str, tuple[type, str]] = {
    "lamina_layers": (LayerSpec, "layer"),
    "lamina_layer_providers": (LayerProvider, "layer provider"),
    "lamina_truncators": (Truncator, "truncator"),
    "lamina_fit_strategies": (FitStrategy, "fit strategy"),
    "lamina_formatters": (Formatter, "formatter"),
    "lamina_summarizers": (Summarizer, "summarizer"),
    "lamina_tool_filters": (ToolFilter, "tool filter"),
    "lamina_adapters": (Adapter, "adapter"),
    "lamina_block_transforms": (BlockTransform, "block transform"),
    "lamina_session_stores": (SessionStore, "session store"),
}


def named(
    hook: str, answers: list[tuple[str, Any]], distribution: dict[str, str]
) -> dict[str, Attributed]:
    """One collection hook's records by name, each attributed to its plugin."""
    record_type, kind = COLLECTIONS[hook]
    out: dict[str, Attributed] = {}
    for plugin, answer in answers:
        for record in answer or ():
            if not isinstance(record, record_type):
                raise PluginError(
                    f"{hook} returned {type(record).__name__}, expected {record_type.__name__}",
                    plugin=plugin,
                )
            item = Attributed(
                record=record,
                plugin=plugin,
                distribution=distribution.get(plugin, "(unknown distribution)"),
            )
            name: str = getattr(record, "name")  # noqa: B009 (every record type has one)
            first = out.get(name)
            if first is not None:
                raise PluginError(
                    f"two {kind}s named {name!r}: one from plugin {first.plugin!r} "
                    f"({first.distribution}), one from plugin {plugin!r} ({item.distribution})",
                    plugin=plugin,
                )
            out[name] = item
    return out


def build_registry(by_hook: dict[str, dict[str, Attributed]]) -> Registry:
    """The registry from every collection hook's named records."""
    return Registry(
        layers=by_hook["lamina_layers"],
        providers=tuple(by_hook["lamina_layer_providers"].values()),
        truncators=by_hook["lamina_truncators"],
        fit_strategies=by_hook["lamina_fit_strategies"],
        formatters=by_hook["lamina_formatters"],
        summarizers=by_hook["lamina_summarizers"],
        tool_filters=tuple(by_hook["lamina_tool_filters"].values()),
        adapters=by_hook["lamina_adapters"],
        block_transforms=tuple(by_hook["lamina_block_transforms"].values()),
        session_stores=tuple(by_hook["lamina_session_stores"].values()),
    )

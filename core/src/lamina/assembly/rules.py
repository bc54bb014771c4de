"""The kernel's layout rules, resolved once per assembler: where a layer's blocks go, how they
are rendered, what caps a layer, and the marker left where history was cut.

Providers see the same rules through ``ProviderContext.layer``, so no plugin copies them.
"""

from __future__ import annotations

from attrs import field, frozen

from lamina.config import LaminaConfig
from lamina.model.blocks import Placement
from lamina.plugins import Registry
from lamina.records import Formatter, LayerSpec, LayerView


@frozen(kw_only=True)
class Rules:
    """Placement, formatter and cap of each layer under one config and set of plugins."""

    config: LaminaConfig
    registry: Registry
    _caps: dict[int, dict[str, int]] = field(factory=dict, init=False, eq=False, repr=False)
    #: Each layer's order (``LayerSpec.order``), the key reports sort layers by.
    order: dict[str, int] = field(init=False, eq=False, repr=False)

    @order.default
    def _order(self) -> dict[str, int]:
        return {name: a.record.order for name, a in self.registry.layers.items()}

    def placement(self, spec: LayerSpec) -> Placement:
        """The layer's physical placement: ``[placement]``, ``[layers.X] placement``, its spec."""
        layer_cfg = self.config.layers.get(spec.name)
        return (
            self.config.placement.get(spec.name)
            or (layer_cfg.placement if layer_cfg else None)
            or spec.placement
        )

    def required(self, spec: LayerSpec) -> bool:
        """Whether the layer's blocks are required unless a block says otherwise."""
        layer_cfg = self.config.layers.get(spec.name)
        if layer_cfg is not None and layer_cfg.required is not None:
            return layer_cfg.required
        return spec.required

    def formatter(self, spec: LayerSpec, placement: Placement) -> Formatter:
        """History uses ``[format] history``; elsewhere the layer's own formatter, else the
        placement's."""
        cfg = self.config.format
        if placement == "history":
            name = cfg.history
        else:
            name = (
                spec.format
                or {
                    "system": cfg.system,
                    "before_history": cfg.history,
                    "after_history": cfg.history,
                    "event": cfg.event,
                }[placement]
            )
        formatter: Formatter = self.registry.formatters[name].record
        return formatter

    def caps(self, available: int) -> dict[str, int]:
        """Each capped layer's token cap: the smaller of ``max_tokens`` and ``share`` (made
        once per available tokens; only read)."""
        found = self._caps.get(available)
        if found is None:
            if len(self._caps) >= 64:
                self._caps.clear()
            found = self._caps[available] = self._made_caps(available)
        return found

    def _made_caps(self, available: int) -> dict[str, int]:
        caps = {}
        for name, layer in self.config.layers.items():
            limits = [
                x
                for x in (
                    layer.max_tokens,
                    None if layer.share is None else int(layer.share * available),
                )
                if x is not None
            ]
            if limits:
                caps[name] = min(limits)
        return caps

    def views(self, available: int) -> dict[str, LayerView]:
        """Every layer's effective placement, formatter and cap, as providers see them."""
        caps = self.caps(available)
        views = {}
        for name, attributed in self.registry.layers.items():
            spec: LayerSpec = attributed.record
            placement = self.placement(spec)
            views[name] = LayerView(
                name=name,
                placement=placement,
                formatter=self.formatter(spec, placement),
                cap=caps.get(name),
            )
        return views

    def marker_text(self, count: int) -> str:
        """The text left where ``count`` history blocks were cut."""
        return self.config.fit.marker.format(count=count)

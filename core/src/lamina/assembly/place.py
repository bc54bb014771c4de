"""Place: each gathered block becomes an item in its physical layer, ordered by layer order
and then by the order it was gathered in."""

from __future__ import annotations

from lamina.assembly.rules import Rules
from lamina.assembly.state import InFlight, Item


def place(state: InFlight, rules: Rules) -> None:
    """The place phase: ``state.items`` in output order, each knowing its placement and
    whether it is required."""
    items = []
    for index, (block, plugin) in enumerate(state.gathered):
        spec = rules.registry.layer(block.layer)
        items.append(
            Item(
                block=block,
                spec=spec,
                placement=rules.placement(spec),
                required=rules.required(spec) if block.required is None else block.required,
                index=index,
                plugin=plugin,
            )
        )
    items.sort(key=lambda i: (i.spec.order, i.index))
    for n, item in enumerate(items):
        item.index = n
    state.items = items

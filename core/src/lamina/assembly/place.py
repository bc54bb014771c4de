"""Place: each gathered block becomes an item in its physical layer, ordered by layer order
and then by the order it was gathered in. Items a stream's previous assembly made for the
same blocks are reused (see ``layout``); only new blocks get new items."""

from __future__ import annotations

from functools import partial

from lamina.assembly.layout import Bucket, Layout, Run, index, place_run
from lamina.assembly.rules import Rules
from lamina.assembly.state import InFlight, Item
from lamina.model.blocks import Block


def place(state: InFlight, rules: Rules, layout: Layout) -> None:
    """The place phase: the items in output order (``state.buckets``, each item knowing
    its index, placement and whether it is required), by layer and by placement;
    ``state.fresh`` the items that are new (to be measured)."""

    runs: dict[int, Run] = {}
    for gathered in state.gathered:
        make = partial(new_item, rules=rules, plugin=gathered.plugin)
        runs[gathered.key] = place_run(layout.runs.get(gathered.key), gathered, make, state.fresh)
    layout.runs = runs
    orders = sorted({order for run in runs.values() for order in run.buckets})
    state.buckets = [
        run.buckets[order] for order in orders for run in runs.values() if order in run.buckets
    ]
    index(state.buckets)
    _views(state, state.buckets)


def new_item(block: Block, *, rules: Rules, plugin: str) -> Item:
    """An item for a block new to the stream, placed by the layout rules (not yet measured)."""
    spec = rules.registry.layer(block.layer)
    return Item(
        block=block,
        spec=spec,
        placement=rules.placement(spec),
        required=rules.required(spec) if block.required is None else block.required,
        index=0,
        plugin=plugin,
    )


def _views(state: InFlight, buckets: list[Bucket]) -> None:
    """The placed items by layer and by placement (a bucket's own list when it is the only
    one: these lists are only read), the history's buckets, and the items fitting looks at
    first (own ``max_tokens``; tool calls and results)."""
    by_layer: dict[str, list[list[Item]]] = {}
    by_placement: dict[str, list[list[Item]]] = {}
    history: list[Bucket] | None = []
    for bucket in buckets:
        if bucket.layer is not None and bucket.placement is not None:
            by_layer.setdefault(bucket.layer, []).append(bucket.items)
            by_placement.setdefault(bucket.placement, []).append(bucket.items)
            if bucket.placement == "history" and history is not None:
                history.append(bucket)
        else:
            for item in bucket.items:
                by_layer.setdefault(item.spec.name, []).append([item])
                by_placement.setdefault(item.placement, []).append([item])
            history = None  # a mixed bucket: history groups are found item by item
        state.capped.extend(bucket.capped)
        state.tool_items.extend(bucket.tools)
    state.by_layer = {k: _joined(v) for k, v in by_layer.items()}
    state.by_placement = {k: _joined(v) for k, v in by_placement.items()}
    state.history_buckets = history


def _joined(lists: list[list[Item]]) -> list[Item]:
    return lists[0] if len(lists) == 1 else [i for part in lists for i in part]

"""Layout: what a stream's previous assembly placed and measured, reused by the next one, so a
warm assembly costs what changed.

A stream is one session on one model. Each provider's blocks (a run) are kept with their
items: when a provider gives the same blocks again, or the same followed by new ones (a
session that grew by a turn), the run's items, measured tokens, order buckets and history
groups are reused, and only the new blocks are placed and measured; other blocks it gave
before keep their items too. Items are pristine between calls: the engine puts back what a
call cut (``Item.reset``) before it stores the layout again, and a layout serves one call at
a time (``LayoutCache.take`` hands it out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from attrs import define, field

from lamina.assembly.state import ORIGINAL, Cut, Gathered, Item
from lamina.model.blocks import Block
from lamina.model.chunked import Chunked
from lamina.model.context import AssembledContext
from lamina.model.messages import Message, ToolCallPart, ToolResultPart
from lamina.model.report import BlockReport, LayerReport

#: How many streams' layouts an assembler keeps (least recently used go first).
STREAMS = 32


@define(kw_only=True, eq=False)
class Bucket:
    """One run's items of one layer order, in gathered order, with what fitting reads of them:
    the items with a ``max_tokens`` of their own, the history items holding tool calls or
    results, and for history the groups and their sizes (computed on first use, extended
    from ``parent`` 's when the run grew).

    A bucket made for a run that grew takes its parent's item list and appends to it (the
    parent's run is done with: the layout keeps the new one); ``size`` is how many items are
    the bucket's own, so a parent whose list went on is never mistaken for a current one."""

    order: int
    items: list[Item]
    size: int
    layer: str | None  # None when layers sharing an order share the bucket
    placement: str | None
    capped: list[Item]
    tools: list[Item]
    parent: Bucket | None = None
    groups: list[list[Item]] | None = None
    sizes: list[int] | None = None
    offset: int = -1  # the index its first item was given
    indexed: int = 0  # how many of its items carry index offset + position
    original: int | None = None  # its items' original tokens, once summed
    whole: int | None = None  # what its items cost kept whole, once summed
    start: int = 0  # how many of its items it has from its parent
    inherited: tuple[int | None, int | None] = (None, None)  # the parent's two sums
    #: The most original tokens among its ``tools`` (once found), and the parent's with how
    #: many of ``tools`` are the parent's.
    peak: int | None = None
    inherited_peak: tuple[int | None, int] = (None, 0)
    #: What its items render to while history is exactly this bucket, untouched (see
    #: ``Cut.memo``).
    memo: dict[str, Any] = field(factory=dict)

    def original_tokens(self) -> int:
        """What the bucket's items held as measured (summed once; a grown bucket adds its new
        items to what its parent had summed)."""
        if self.original is None:
            base, start = self.inherited[0], self.start
            if base is None:
                base, start = 0, 0
            self.original = base + sum(map(ORIGINAL, self.items[start:]))
        return self.original

    def cost(self) -> int:
        """What all its items cost kept whole (summed once, as ``original_tokens``)."""
        if self.whole is None:
            base, start = self.inherited[1], self.start
            if base is None:
                base, start = 0, 0
            self.whole = base + sum(i.original_tokens + i.charge for i in self.items[start:])
        return self.whole

    def tools_peak(self) -> int:
        """The most original tokens any of its tool items holds (found once; a grown bucket
        looks only at its new ones), 0 with none."""
        if self.peak is None:
            base, start = self.inherited_peak
            if base is None:
                base, start = 0, 0
            self.peak = max(base, max(map(ORIGINAL, self.tools[start:]), default=0))
        return self.peak

    def shape(self) -> tuple[list[list[Item]], list[int]]:
        """The history groups of the bucket's items and what each costs kept whole."""
        if self.groups is None or self.sizes is None:
            parent = self.parent
            if parent is not None and parent.groups is not None and parent.sizes is not None:
                groups, sizes = list(parent.groups), list(parent.sizes)
                extend_groups(groups, sizes, self.items[parent.size : self.size])
            else:
                groups, sizes = [], []
                extend_groups(groups, sizes, self.items[: self.size])
            self.groups, self.sizes, self.parent = groups, sizes, None
        return self.groups, self.sizes


def extend_groups(groups: list[list[Item]], sizes: list[int], items: list[Item]) -> None:
    """Add ``items`` to ``groups`` (and what they cost kept whole to ``sizes``) as
    ``history_groups`` would: consecutive items sharing a ``group`` form one group, ungrouped
    items stand alone. Only pristine values are read (an item may still show last call's cut)."""
    copied = False
    for item in items:
        key = item.base.group
        if groups and key is not None and groups[-1][0].base.group == key:
            if not copied:  # the last group may be a parent's: never change it in place
                groups[-1] = list(groups[-1])
                copied = True
            groups[-1].append(item)
            sizes[-1] += item.original_tokens + item.charge
        else:
            groups.append([item])
            sizes.append(item.original_tokens + item.charge)
            copied = True


def merged_shape(buckets: list[Bucket]) -> tuple[list[list[Item]], list[int]]:
    """The history groups of several buckets in output order (a group may span two)."""
    if len(buckets) == 1:
        return buckets[0].shape()
    groups: list[list[Item]] = []
    sizes: list[int] = []
    for bucket in buckets:
        more, more_sizes = bucket.shape()
        if not more:
            continue
        key = more[0][0].base.group
        if groups and key is not None and groups[-1][0].base.group == key:
            groups[-1] = groups[-1] + more[0]
            sizes[-1] += more_sizes[0]
            groups.extend(more[1:])
            sizes.extend(more_sizes[1:])
        else:
            groups.extend(more)
            sizes.extend(more_sizes)
    return groups, sizes


def inherit(memo: dict[str, Any], n: int) -> dict[str, Any]:
    """A memo for history that is the ``n`` items ``memo`` was made for followed by new ones
    (a session that grew by a turn): it starts from what ``memo`` has (messages, the prefix's
    hash, cost, reports) and makes only the new items' (see ``format._history``)."""
    if "messages" not in memo or "prefix" not in memo:
        return {}
    base = {"n": n, "messages": memo["messages"], "prefix": memo["prefix"]}
    base["cost"], base["reports"] = memo.get("cost"), memo.get("reports")
    return {"base": base}


#: (A tuple, not ``ToolCallPart | ToolResultPart``: that builds a union on every call.)
_TOOL_PARTS = (ToolCallPart, ToolResultPart)


def has_tools(item: Item) -> bool:
    # A loop, not ``any()`` over a generator: one that stops early is closed by raising
    # GeneratorExit in it, exception machinery a request would otherwise never run.
    if item.placement == "history":
        for part in item.block.content:
            if isinstance(part, _TOOL_PARTS):
                return True
    return False


def _buckets(items: list[Item], parents: dict[int, Bucket] | None = None) -> dict[int, Bucket]:
    """``items`` by layer order (ascending), each bucket extending its parent's, if any."""
    split: dict[int, list[Item]] = {}
    for item in items:
        split.setdefault(item.spec.order, []).append(item)
    out: dict[int, Bucket] = dict(parents or {})
    for order, members in split.items():
        layers = {i.spec.name for i in members}
        parent = out.get(order)
        if parent is not None and (parent.layer is None or {parent.layer} != layers):
            layers.add("")  # mixed: the bucket has more than one layer
        layer = next(iter(layers)) if len(layers) == 1 else None
        capped = [i for i in members if i.block.max_tokens is not None]
        tools = [i for i in members if has_tools(i)]
        if parent is None:
            bucket = Bucket(
                order=order,
                items=members,
                size=len(members),
                layer=layer,
                placement=members[0].placement if layer is not None else None,
                capped=capped,
                tools=tools,
            )
        else:
            if len(parent.items) == parent.size:  # its list goes on (see Bucket)
                grown = parent.items
                grown += members
            else:
                grown = parent.items[: parent.size] + members
            bucket = Bucket(
                order=order,
                items=grown,
                size=len(grown),
                layer=layer,
                placement=parent.placement if layer is not None else None,
                capped=parent.capped + capped,
                tools=parent.tools + tools,
                # Its groups are made from the nearest ancestor that has them (at most one
                # is kept: a stream that never needs its groups holds no chain of buckets).
                parent=parent if parent.groups is not None else parent.parent,
                offset=parent.offset,
                indexed=parent.indexed,
                start=parent.size,
                inherited=(parent.original, parent.whole),
                inherited_peak=(parent.peak, len(parent.tools)),
                memo=inherit(parent.memo, parent.size),
            )
        out[order] = bucket
    return dict(sorted(out.items()))


@define(kw_only=True, eq=False)
class Run:
    """One provider's blocks as last gathered (a copy of the list), their items, and the
    items by layer order."""

    plugin: str
    blocks: Sequence[Block]
    items: list[Item]
    buckets: dict[int, Bucket]


def place_run(
    prev: Run | None, gathered: Gathered, make: Callable[[Block], Item], fresh: list[Item]
) -> Run:
    """The run for ``gathered``: ``prev`` itself when its blocks are the same, ``prev``
    extended when they only grew at the end, else new items but for blocks ``prev`` had."""
    blocks = gathered.blocks
    kept = blocks if gathered.own else list(blocks)
    known: dict[int, Item] = {}
    if prev is not None and prev.plugin == gathered.plugin:
        n = len(prev.blocks)
        # Gather found them to start with the blocks it kept last call: this run's, if so.
        proven = gathered.prior is not None and gathered.prior is prev.blocks
        intact = all(len(b.items) == b.size for b in prev.buckets.values())
        if len(blocks) == n and intact and (proven or blocks == prev.blocks):
            if prev.blocks is not kept:
                prev.blocks = kept  # (the same blocks: the run keeps gather's copy)
            return prev
        if len(blocks) > n and intact and (proven or blocks[:n] == prev.blocks):
            tail = [make(b) for b in blocks[n:]]
            fresh.extend(tail)
            buckets = _buckets(tail, prev.buckets)
            items = prev.items + tail if len(buckets) != 1 else None
            if items is None:  # one bucket: it holds the run's items, in order
                items = next(iter(buckets.values())).items
            return Run(plugin=prev.plugin, blocks=kept, items=items, buckets=buckets)
        known = {id(i.base): i for b in prev.buckets.values() for i in b.items[: b.size]}
    items = []
    for block in blocks:
        item = known.get(id(block))
        if item is None or item.base is not block:
            item = make(block)
            fresh.append(item)
        items.append(item)
    return Run(plugin=gathered.plugin, blocks=kept, items=items, buckets=_buckets(items))


def index(buckets: list[Bucket]) -> None:
    """Give each item of ``buckets`` its position in output order as ``index`` (set only where
    it moved or is new)."""
    offset = 0
    for bucket in buckets:
        members = bucket.items
        if bucket.offset != offset:
            bucket.offset, bucket.indexed = offset, 0
        if bucket.indexed < len(members):
            for n in range(bucket.indexed, len(members)):
                members[n].index = offset + n
            bucket.indexed = len(members)
        offset += len(members)


@define(kw_only=True, eq=False)
class Checked:
    """What gather found valid in one provider's blocks last time: the blocks, their ids and
    whether any is a session block."""

    blocks: Sequence[Block]
    ids: set[str]
    session: bool
    #: The previous call's ``blocks`` when these start with them (found equal), else None.
    prior: Sequence[Block] | None = None


@define(kw_only=True, eq=False)
class Whole:
    """What a call that kept every block whole leaves for its stream's next call, which is
    assembled from it while only the history grew (see ``grown``): the context; what besides
    blocks decided it (``key``); each provider's blocks by position, with what they were
    (``FIXED``, ``HISTORY`` or ``EVENT``); the history's layer and its layer order; what
    fitting estimated for all but the current message; the history's messages, the stable
    prefix's hash fed through them and their reports; the reports of the blocks before the
    history and of the layers outside the current message; the smallest tool-result cap."""

    context: AssembledContext
    key: tuple[Any, ...]
    runs: list[tuple[int, str, Sequence[Block]]]
    layer: str
    order: int
    estimate: int
    messages: Chunked[Message]
    prefix: Any
    head: Sequence[BlockReport]
    reports: Chunked[BlockReport]
    layers: tuple[LayerReport, ...]
    floor: int


#: What a provider's blocks were in a ``Whole`` call: none in history or the current
#: message (the same blocks must come again); some in history, none in the current message
#: (they may grow at the end, by history blocks); all in the current message (made anew).
FIXED, HISTORY, EVENT = "fixed", "history", "event"


@define(kw_only=True, eq=False)
class Layout:
    """One stream's runs (by provider position), gather's memo, the history cut its last
    call made on pristine groups (whose items are still dropped) and, when that call kept
    everything whole, what the next call may grow from, for one tokenizer revision."""

    revision: Any
    runs: dict[int, Run] = field(factory=dict)
    checked: dict[int, Checked] = field(factory=dict)
    cut: Cut | None = None
    whole: Whole | None = None


class LayoutCache:
    """The layouts of the last ``STREAMS`` streams, each handed to one call at a time."""

    def __init__(self, size: int = STREAMS) -> None:
        self.size = size
        self._layouts: OrderedDict[Hashable, Layout] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: Hashable, revision: Any) -> Layout:
        """The stream's layout (a new one when none is stored, another call holds it, or the
        tokenizer's revision changed)."""
        with self._lock:
            layout = self._layouts.pop(key, None)
        if layout is None or layout.revision != revision:
            return Layout(revision=revision)
        return layout

    def give(self, key: Hashable, layout: Layout) -> None:
        """Store the stream's layout back for its next call."""
        with self._lock:
            self._layouts[key] = layout
            self._layouts.move_to_end(key)
            while len(self._layouts) > self.size:
                self._layouts.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._layouts.clear()

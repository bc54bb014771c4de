"""Cutting history: whole groups (turns) at a time, as the fit strategy picks, with a marker
where a run of groups went.

The groups and their sizes come from the layout while no history item has changed this call
(``groups``), and a cut equal to the stream's previous one (the same groups object, the same
groups kept, strategy and marking) takes that cut's items as they are: they were left dropped
between the calls (``stale``), so a warm assembly marks nothing again. Anything else puts the
previous cut's items back first (``resolve``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from attrs import define, field

from lamina.assembly.cut import full, shifted
from lamina.assembly.layout import Bucket, merged_shape
from lamina.assembly.measure import Measurer
from lamina.assembly.state import Cut, InFlight, Item, order_key, total
from lamina.errors import BudgetError
from lamina.records import FitStrategy, Tokenizer


@define(kw_only=True)
class Cutter:
    """The history half of fitting, and the record of what a call changed: ``touched``
    items (put back when the call ends), ``cuts`` (for the report) and ``markers``."""

    tokenizer: Tokenizer
    measurer: Measurer
    strategy: FitStrategy
    minimum_recent: int
    markers: list[Item] = field(factory=list)
    touched: list[Item] = field(factory=list)
    cuts: list[Cut] = field(factory=list)
    by_layer: dict[str, list[Item]] | None = None
    by_placement: dict[str, list[Item]] | None = None
    #: The one history layer's buckets while no history item changed this call, else None.
    history: list[Bucket] | None = None
    #: The previous call's pristine cut, its items still dropped; the one made this call.
    stale: Cut | None = None
    cut: Cut | None = None
    _shape: tuple[list[list[Item]], list[int]] | None = None
    _history_total: int | None = None

    def begin(self, state: InFlight, previous: Cut | None) -> None:
        """Take the placed items' views and the stream's previous cut. Its items stay dropped
        only while nothing else may read or change them first: one history layer of whole
        buckets and no history block with a cap of its own (tool results to cap put them
        back too: see the engine)."""
        self.by_layer, self.by_placement = state.by_layer, state.by_placement
        self.stale = previous
        buckets = state.history_buckets
        single = buckets is not None and len({b.layer for b in buckets}) <= 1
        self.history = buckets if single else None
        if not single or any(i.placement == "history" for i in state.capped):
            self.resolve()

    def touch(self, item: Item) -> None:
        """Record that ``item`` changed (a history item: groups are now found item by item)."""
        self.touched.append(item)
        if item.placement == "history":
            self.resolve()
            self.history = self._shape = self._history_total = None

    def resolve(self) -> None:
        """Put back the items of the previous call's cut this call did not make again."""
        stale, self.stale = self.stale, None
        if stale is not None:
            for item in stale.members():
                item.reset()

    def groups(self, items: Sequence[Item]) -> tuple[list[list[Item]], list[int]]:
        """The history groups of ``items`` (one layer, or all history) and their costs."""
        if self.history is not None:
            if self._shape is None:
                self._shape = merged_shape(self.history)
            return self._shape
        found = history_groups([i for i in items if i.live])
        return found, [total(g) for g in found]

    def recent_sizes(self, items: Sequence[Item], count: int) -> list[int]:
        """What the newest ``count`` history groups (all, when fewer) cost kept whole, oldest
        first: while history is as placed, from the buckets' newest items (no groups are made:
        a session that grew by a turn looks at that turn), else from ``groups``."""
        if self.history is None or self._shape is not None:
            sizes = self.groups(items)[1]
            return sizes[len(sizes) - min(count, len(sizes)) :]
        out: list[int] = []
        if count <= 0:
            return out
        key: str | None = None
        size = -1  # the group being summed, newest first (-1: none yet)
        for bucket in reversed(self.history):
            for item in reversed(bucket.items):
                group = item.base.group
                if size >= 0 and group is not None and group == key:
                    size += item.original_tokens + item.charge
                    continue
                if size >= 0:
                    out.append(size)
                    if len(out) == count:
                        return out[::-1]
                key, size = group, item.original_tokens + item.charge
        if size >= 0:
            out.append(size)
        return out[::-1]

    def layer_total(self, items: Sequence[Item]) -> int:
        """What one layer's items cost now (history: from the groups until it is cut)."""
        if items and items[0].placement == "history":
            if self._history_total is not None:
                return self._history_total
            if self.history is not None:
                return sum(b.cost() for b in self.history)  # merging groups keeps the sum
        return total(items)

    @property
    def clean(self) -> bool:
        """Whether history is as placed but for a cut made on its pristine groups."""
        return self.history is not None or self._history_total is not None

    def live_history(self) -> list[Item] | None:
        """The kept history items with the gap markers in place, in order, when known without
        looking at each item: history as placed, or as placed but for one pristine cut (kept
        in the memo of the bucket or of the cut). ``None`` otherwise."""
        memo = self.memo()
        if memo is not None:
            live: list[Item] | None = memo.get("live")
            if live is None:
                live = memo["live"] = self._live()
            return live
        if self.history is not None and self.by_placement is not None:
            return list(self.by_placement.get("history", []))
        return None

    def _live(self) -> list[Item]:
        cut = self.cut
        if cut is None or cut.groups is None:  # nothing cut: the one bucket's own (read-only)
            return self.history[0].items if self.history else []
        groups = cut.groups
        live = [i for n in cut.keep for i in groups[n]]
        for marker in self.markers:
            live.insert(bisect_left(live, order_key(marker), key=order_key), marker)
        return live

    def memo(self) -> dict[str, Any] | None:
        """The memo of what the kept history renders to: the one history bucket's while
        history is untouched, this call's pristine cut's while nothing else changed it."""
        if self.history is not None:
            return self.history[0].memo if len(self.history) == 1 else None
        if self._history_total is None or self.cut is None:
            return None
        return self.cut.memo

    def marker_total(self) -> int:
        return total(self.markers)

    def shrink_history(self, items: Sequence[Item], target: int) -> None:
        """Keep the history groups the strategy picks within ``target``; mark the gaps."""
        pristine = self.history is not None
        groups, sizes = self.groups(items)
        if not groups or self.layer_total(items) <= target:
            return
        protected = min(self.minimum_recent, len(groups))
        marking = self.strategy.marks_gaps
        if marking:  # a marker for every live block: the most a gap can hold
            count = len(items) if pristine else sum(map(len, groups))
            marker_tokens = self.measurer.marker(count).cost
        else:
            marker_tokens = 0
        asked = (target, protected, marker_tokens, self.strategy.name)
        stale = self.stale
        if pristine and stale is not None and stale.groups is groups and stale.asked == asked:
            keep, marking = stale.keep, stale.marking  # the strategy's answer, last call
        else:
            keep, marking = self._select(groups, sizes, target, protected, marker_tokens)
        name, layer = self.strategy.name, items[0].spec.name
        if len(set(keep)) >= len(groups):  # the strategy kept everything: nothing to cut
            self.resolve()
            return
        if (
            pristine
            and stale is not None
            and stale.groups is groups
            and stale.keep == keep
            and stale.strategy == name
            and stale.marking == marking
        ):
            cut, self.stale = stale, None  # the same cut: its items are dropped already
        else:
            made = None
            if pristine and stale is not None and self.history is not None:
                totals = (len(items), sum(b.original_tokens() for b in self.history))
                made = shifted(stale, layer, groups, keep, name, marking, totals)
            if made is None:
                self.resolve()
                made = full(layer, groups, keep, name, marking)
            else:
                self.stale = None  # its items are this cut's now
            cut = made
            cut.kept_cost = sum(sizes[n] for n in keep)
            cut.asked = asked
        if pristine:
            self.cut = cut  # its items stay dropped when the call ends
        else:
            self.touched.extend(cut.members())
        self.cuts.append(cut)
        if cut.marking:
            if len(cut.markers) != len(cut.gaps):
                cut.markers = [self.measurer.marker(count) for count, _ in cut.gaps]
            for marker, (_, anchor) in zip(cut.markers, cut.gaps, strict=True):
                # Sorted just before the first kept block after the gap (or at the end).
                marker.index = anchor.index
            self.markers.extend(cut.markers)
        self.history = self._shape = None
        self._history_total = cut.kept_cost if pristine else None

    def _select(
        self,
        groups: list[list[Item]],
        sizes: list[int],
        target: int,
        protected: int,
        marker_tokens: int,
    ) -> tuple[tuple[int, ...], bool]:
        """The groups the strategy keeps, and whether the gaps are marked."""
        try:
            try:
                cut = self.strategy.select(sizes, target, protected, marker_tokens)
                return tuple(cut.keep), self.strategy.marks_gaps
            except BudgetError:
                if not marker_tokens:
                    raise
                # No room even for the gap marker: cut without one (the report still says so).
                return tuple(self.strategy.select(sizes, target, protected, 0).keep), False
        except BudgetError as exc:
            raise BudgetError(
                f"{exc}; would have to go: {_would_go(groups, sizes, target, protected)}",
                overage=exc.overage,
                available=exc.available,
            ) from exc


def _would_go(groups: list[list[Item]], sizes: list[int], target: int, protected: int) -> str:
    """The blocks a rolling window would drop, to name them in a refusal."""
    from lamina.fitting_strategies import rolling_window

    try:
        keep = set(rolling_window(sizes, target, protected, 0).keep)
    except BudgetError:
        keep = set()
    gone = [i.block.id for n, g in enumerate(groups) if n not in keep for i in g]
    return ", ".join(gone[:20]) + (f" and {len(gone) - 20} more" if len(gone) > 20 else "")


def history_groups(items: Sequence[Item]) -> list[list[Item]]:
    """Consecutive items sharing a ``group`` form one group; ungrouped items stand alone."""
    groups: list[list[Item]] = []
    for item in items:
        key = item.block.group
        if groups and key is not None and groups[-1][0].block.group == key:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups

"""Fit: cut blocks until the request fits its budget, in compression-priority order.

Layers are cut in ``cut_rank`` order (the Broker design: memory first, then history); required blocks
are never cut. Within a layer the lowest-priority, latest block goes first: summarized when it
is ``summarizable`` and a summarizer is configured, else truncated by its own strategy, else
dropped. History is cut a whole group (turn) at a time by the configured fit strategy, so a
tool call never loses its result.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import define, field

from lamina.assembly.measure import Measurer
from lamina.assembly.state import InFlight, Item
from lamina.errors import BudgetError
from lamina.records import FitStrategy, Summarizer, Tokenizer, Truncator
from lamina.wording import counted


@define(kw_only=True)
class Fitter:
    """Holds what fitting needs: the tokenizer, a measurer, the named truncators, the history
    strategy and the layer caps."""

    tokenizer: Tokenizer
    measurer: Measurer
    truncators: dict[str, Truncator]
    strategy: FitStrategy
    minimum_recent: int
    summarizer: Summarizer | None = None
    caps: dict[str, int] = field(factory=dict)
    markers: list[Item] = field(factory=list)
    #: Where a summarizer's failure is reported (the assembly's warnings).
    warnings: list[str] = field(factory=list)

    # -- totals --------------------------------------------------------------------------

    @staticmethod
    def total(items: Sequence[Item]) -> int:
        return sum(i.cost for i in items)

    # -- one block -----------------------------------------------------------------------

    def shrink_block(self, item: Item, need: int) -> int:
        """Free at least ``need`` tokens from one block, or drop it. Returns tokens freed."""
        before = item.tokens
        summarize = self.summarizer is not None and item.block.summarizable
        if summarize and self._summarize(item, before - need):
            return before - item.tokens
        truncate = item.block.truncation != "never" and need < before
        if truncate and self._truncate(item, before - need):
            return before - item.tokens
        item.status = "dropped"
        item.reason = item.reason or "over budget; lowest priority in its layer"
        item.tokens = 0
        return before

    def truncate_to(self, item: Item, limit: int) -> bool:
        """Truncate one block to at most ``limit`` tokens by its own strategy (never drops)."""
        return item.block.truncation != "never" and self._truncate(item, limit)

    def _truncate(self, item: Item, limit: int) -> bool:
        truncator = self.truncators[item.block.truncation]
        if item.block.text_part_index() is None:
            return False
        original = item.block
        body_tokens = self.tokenizer.count(original.body)
        markup = max(0, item.tokens - body_tokens)
        target = limit - markup
        for _ in range(4):
            if target <= 0:
                break
            text = truncator.truncate(original.body, target, self.tokenizer)
            if text is None:
                break
            item.block = original.with_text(text)
            measured = self.measurer.measure(item)
            if measured <= limit:
                if measured < item.block.min_tokens:
                    break
                item.tokens = measured
                item.status = "truncated"
                item.strategy = truncator.name
                return True
            target -= measured - limit
        item.block = original
        return False

    def _summarize(self, item: Item, limit: int) -> bool:
        assert self.summarizer is not None
        original = item.block
        if original.text_part_index() is None or limit <= 0:
            return False
        try:
            text = self.summarizer.summarize([original], limit, self.tokenizer)
            if not isinstance(text, str):
                raise TypeError(f"returned {type(text).__name__}, not text")
        except Exception as exc:  # an optional step: the block is truncated or dropped instead
            self.warnings.append(
                f"summarizer {self.summarizer.name!r} failed on {original.id}: "
                f"{type(exc).__name__}: {exc}; cut without it"
            )
            return False
        item.block = original.with_text(text)
        measured = self.measurer.measure(item)
        if 0 < measured <= limit:
            item.tokens = measured
            item.status = "summarized"
            item.strategy = self.summarizer.name
            return True
        item.block = original
        return False

    # -- a layer -------------------------------------------------------------------------

    def shrink_blocks(self, items: Sequence[Item], target: int) -> None:
        """Cut non-required blocks (lowest priority, latest first) until ``items`` fit ``target``."""
        cuttable = sorted(
            (i for i in items if i.live and not i.required),
            key=lambda i: (i.block.priority, -i.index),
        )
        current = self.total(items)
        for item in cuttable:
            if current <= target:
                break
            current -= self.shrink_block(item, current - target)

    def shrink_history(self, items: Sequence[Item], target: int) -> None:
        """Keep the history groups the strategy picks within ``target``; mark the gaps."""
        groups = history_groups([i for i in items if i.live])
        if not groups:
            return
        sizes = [sum(i.cost for i in g) for g in groups]
        if sum(sizes) <= target:
            return
        protected = min(self.minimum_recent, len(groups))
        marker_tokens = (
            self.measurer.marker(sum(len(g) for g in groups)).cost
            if self.strategy.marks_gaps
            else 0
        )
        marking = self.strategy.marks_gaps
        try:
            try:
                cut = self.strategy.select(sizes, target, protected, marker_tokens)
            except BudgetError:
                if not marker_tokens:
                    raise
                # No room even for the gap marker: cut without one (the report still says so).
                cut = self.strategy.select(sizes, target, protected, 0)
                marking = False
        except BudgetError as exc:
            raise BudgetError(
                f"{exc}; would have to go: {self._would_go(groups, sizes, target, protected)}",
                overage=exc.overage,
                available=exc.available,
            ) from exc
        keep = set(cut.keep)
        gap: list[Item] = []
        for n, group in enumerate(groups):
            if n in keep:
                if gap and marking:
                    self._mark_gap(gap, before=group[0])
                    gap = []
                continue
            for item in group:
                item.status = "dropped"
                item.strategy = self.strategy.name
                item.reason = f"history cut by {self.strategy.name}"
                item.tokens = 0
                gap.append(item)
        if gap and marking:
            self._mark_gap(gap, before=None)

    @staticmethod
    def _would_go(groups: list[list[Item]], sizes: list[int], target: int, protected: int) -> str:
        """The blocks a rolling window would drop, to name them in a refusal."""
        from lamina.fitting_strategies import rolling_window

        try:
            keep = set(rolling_window(sizes, target, protected, 0).keep)
        except BudgetError:
            keep = set()
        gone = [i.block.id for n, g in enumerate(groups) if n not in keep for i in g]
        return ", ".join(gone[:20]) + (f" and {len(gone) - 20} more" if len(gone) > 20 else "")

    def _mark_gap(self, dropped: list[Item], before: Item | None) -> None:
        marker = self.measurer.marker(len(dropped))
        # Sort the marker just before the first kept block after the gap (or at the end).
        marker.index = before.index if before is not None else dropped[-1].index
        self.markers.append(marker)

    def shrink_layer(self, items: Sequence[Item], target: int) -> None:
        history = [i for i in items if i.placement == "history"]
        others = [i for i in items if i.placement != "history"]
        if others:
            self.shrink_blocks(others, max(0, target - self.total(history)))
        if history and self.total(items) > target:
            self.shrink_history(history, max(0, target - self.total(others)))

    # -- the whole request ---------------------------------------------------------------

    def fit(self, items: Sequence[Item], available: int, fixed: int, extra: int = 0) -> None:
        """Cut ``items`` until they and the ``fixed`` overhead fit within ``available``, less
        ``extra``: what the exact recount of the formatted text found beyond the estimate
        (it is cut from what may be cut, and is no reason to refuse required content)."""
        by_layer: dict[str, list[Item]] = {}
        for item in items:
            by_layer.setdefault(item.spec.name, []).append(item)
        for layer, cap in sorted(self.caps.items()):
            if layer in by_layer and self.total(by_layer[layer]) > cap:
                self.shrink_layer(by_layer[layer], cap)
        self._check_required(items, available, fixed)
        order = sorted(by_layer, key=lambda name: (by_layer[name][0].spec.cut_rank, name))
        for layer in order:
            over = self.total(items) + self.marker_total() + fixed + extra - available
            if over <= 0:
                return
            members = by_layer[layer]
            try:
                self.shrink_layer(members, max(0, self.total(members) - over))
            except BudgetError as exc:
                raise BudgetError(
                    f"{exc} (the whole context has {available} tokens available)",
                    overage=max(over, exc.overage),
                    available=available,
                ) from exc
        over = self.total(items) + self.marker_total() + fixed + extra - available
        if over > 0:
            raise BudgetError(
                f"the context needs {over} more tokens than the {available} available even "
                "after cutting everything that may be cut",
                overage=over,
                available=available,
            )

    def marker_total(self) -> int:
        return sum(m.cost for m in self.markers)

    def _check_required(self, items: Sequence[Item], available: int, fixed: int) -> None:
        groups = history_groups([i for i in items if i.live and i.placement == "history"])
        protected = groups[len(groups) - min(self.minimum_recent, len(groups)) :] if groups else []
        must = [i for i in items if i.live and i.required and i.placement != "history"]
        must += [i for g in protected for i in g]
        needed = sum(i.cost for i in must) + fixed
        if needed > available:
            biggest = sorted(must, key=lambda i: -i.tokens)[:3]
            names = ", ".join(f"{i.block.id} ({i.tokens})" for i in biggest)
            raise BudgetError(
                f"what must not be cut (system prompt, current event, the last "
                f"{counted(self.minimum_recent, 'turn')}) needs {needed} tokens but only {available} are "
                f"available: over by {needed - available}; largest: {names}",
                overage=needed - available,
                available=available,
            )


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


def apply_block_caps(items: Sequence[Item], fitter: Fitter, warnings: list[str]) -> None:
    """Shrink blocks over their own ``max_tokens``; a required block is truncated if its
    strategy allows, never dropped."""
    for item in items:
        cap = item.block.max_tokens
        if cap is None or item.tokens <= cap:
            continue
        if item.required:
            if not fitter.truncate_to(item, cap):
                warnings.append(
                    f"required block {item.block.id!r} has {item.tokens} tokens, over its "
                    f"max_tokens ({cap}), and cannot be truncated: kept whole"
                )
            continue
        fitter.shrink_block(item, item.tokens - cap)
        if not item.live:
            item.reason = f"larger than its max_tokens ({cap})"


def fit(state: InFlight, fitter: Fitter) -> None:
    """The fit phase: blocks over their own caps, then layers over theirs, then the whole
    request within the available budget."""
    apply_block_caps(state.items, fitter, state.warnings)
    fitter.fit(state.items, state.budget.available, state.fixed)
    for layer, cap in fitter.caps.items():
        over = fitter.total([i for i in state.items if i.spec.name == layer]) - cap
        if over > 0:
            state.warnings.append(
                f"layer {layer!r} is {over} tokens over its cap ({cap}): what is left is required"
            )
    state.markers = fitter.markers
    state.caps = fitter.caps
    state.strategy = fitter.strategy.name

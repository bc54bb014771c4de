"""Fit: cut blocks until the request fits its budget, in compression-priority order.

Layers are cut in ``cut_rank`` order (the Broker design: memory first, then history); required blocks
are never cut. Within a layer the lowest-priority, latest block goes first: summarized when it
is ``summarizable`` and a summarizer is configured, else truncated by its own strategy, else
dropped. History is cut a whole group (turn) at a time by the configured fit strategy, so a
tool call never loses its result.

While no history item has changed this call, history groups and their sizes come from the
layout (see ``layout``), and a cut equal to the stream's previous one leaves that cut's items
as they are; everything the fitter changes is recorded (``touched``) to be put back after.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import define, field

from lamina.assembly.history import Cutter
from lamina.assembly.state import Cut, InFlight, Item, total
from lamina.errors import BudgetError
from lamina.records import Summarizer, Truncator
from lamina.wording import counted


@define(kw_only=True)
class Fitter(Cutter):
    """Holds what fitting needs: the tokenizer, a measurer, the named truncators, the history
    strategy and the layer caps (``Cutter`` has the history part)."""

    truncators: dict[str, Truncator]
    summarizer: Summarizer | None = None
    caps: dict[str, int] = field(factory=dict)
    #: Where a summarizer's failure is reported (the assembly's warnings).
    warnings: list[str] = field(factory=list)

    total = staticmethod(total)

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
        item.drop(item.reason or "over budget; lowest priority in its layer")
        self.touch(item)
        self.cuts.append(Cut.of(item))
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
                self.touch(item)
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
            self.touch(item)
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
        current = total(items)
        for item in cuttable:
            if current <= target:
                break
            current -= self.shrink_block(item, current - target)

    def shrink_layer(self, items: Sequence[Item], target: int) -> None:
        """Cut one layer's items (all of one placement) to ``target`` tokens."""
        if not items:
            return
        if items[0].placement != "history":
            self.shrink_blocks(items, target)
        elif self.layer_total(items) > target:
            self.shrink_history(items, target)

    # -- the whole request ---------------------------------------------------------------

    def fit(self, available: int, fixed: int, extra: int = 0) -> None:
        """Cut the placed items (``begin``) until they and the ``fixed`` overhead fit within
        ``available``, less ``extra``: what the exact recount of the formatted text found
        beyond the estimate (it is cut from what may be cut, and is no reason to refuse
        required content)."""
        by_layer = self.by_layer or {}
        for layer, cap in sorted(self.caps.items()):
            if layer in by_layer and self.layer_total(by_layer[layer]) > cap:
                self.shrink_layer(by_layer[layer], cap)
        self._check_required(available, fixed)
        totals = {name: self.layer_total(members) for name, members in by_layer.items()}
        current = sum(totals.values())
        order = sorted(by_layer, key=lambda name: (by_layer[name][0].spec.cut_rank, name))
        for layer in order:
            over = current + self.marker_total() + fixed + extra - available
            if over <= 0:
                return
            members = by_layer[layer]
            try:
                self.shrink_layer(members, max(0, totals[layer] - over))
            except BudgetError as exc:
                raise BudgetError(
                    f"{exc} (the whole context has {available} tokens available)",
                    overage=max(over, exc.overage),
                    available=available,
                ) from exc
            now = self.layer_total(members)
            current += now - totals[layer]
            totals[layer] = now
        over = current + self.marker_total() + fixed + extra - available
        if over > 0:
            raise BudgetError(
                f"the context needs {over} more tokens than the {available} available even "
                "after cutting everything that may be cut",
                overage=over,
                available=available,
            )

    def estimate(self, fixed: int) -> int:
        """What the placed items, the gap markers and ``fixed`` cost now."""
        layers = (self.by_layer or {}).values()
        return sum(self.layer_total(m) for m in layers) + self.marker_total() + fixed

    def _check_required(self, available: int, fixed: int) -> None:
        by_placement = self.by_placement or {}
        history = by_placement.get("history", [])
        must = [
            i
            for placement, members in by_placement.items()
            if placement != "history"
            for i in members
            if i.live and i.required
        ]
        needed = total(must) + sum(self.recent_sizes(history, self.minimum_recent)) + fixed
        if needed > available:
            groups, _sizes = self.groups(history)
            keep = min(self.minimum_recent, len(groups))
            self.resolve()  # the figures below are this call's
            must = sorted([*must, *(i for g in groups[len(groups) - keep :] for i in g)], key=_at)
            biggest = sorted(must, key=lambda i: -i.tokens)[:3]
            names = ", ".join(f"{i.block.id} ({i.tokens})" for i in biggest)
            raise BudgetError(
                f"what must not be cut (system prompt, current event, the last "
                f"{counted(self.minimum_recent, 'turn')}) needs {needed} tokens but only {available} are "
                f"available: over by {needed - available}; largest: {names}",
                overage=needed - available,
                available=available,
            )


def _at(item: Item) -> int:
    return item.index


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
    apply_block_caps(state.capped, fitter, state.warnings)
    fitter.fit(state.budget.available, state.fixed)
    fitter.resolve()  # what the previous call cut and this one did not is back
    for layer, cap in fitter.caps.items():
        over = total(state.by_layer.get(layer, [])) - cap
        if over > 0:
            state.warnings.append(
                f"layer {layer!r} is {over} tokens over its cap ({cap}): what is left is required"
            )
    state.markers = fitter.markers
    state.caps = fitter.caps
    state.strategy = fitter.strategy.name

"""Format and verify: render the kept items into the three physical layers, then count the
final text exactly; if BPE merges across joins put it over, cut a little more and repeat."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from lamina.assembly.fit import Fitter
from lamina.assembly.measure import Measurer
from lamina.assembly.state import Formatted, InFlight, Item, order_key
from lamina.errors import BudgetError
from lamina.model.budget import BudgetUsage
from lamina.model.event_context import merge_context_json
from lamina.model.messages import Message, Part, TextPart, ToolResultPart

#: How many times formatting is re-checked against the exact count before giving up.
VERIFY_ROUNDS = 8


def format_within(state: InFlight, measurer: Measurer, fitter: Fitter) -> None:
    """The format phase: ``state.formatted`` and its exact ``state.used``.

    The exact count can exceed the piecewise estimate (BPE merges across joins); when that puts
    the text over, shrink the estimate's target by the observed ratio and fit again. Fitting
    only cuts, and each round demands at least one token more, so this ends.
    """
    available, items = state.budget.available, state.items
    extra = 0
    for _ in range(VERIFY_ROUNDS):
        live = [i for i in items if i.live] + fitter.markers
        out = render(live, measurer)
        used = usage(state, measurer, out, live)
        over = used.total - available
        if over <= 0:
            state.formatted, state.used = out, used
            return
        estimate = fitter.total(items) + fitter.marker_total() + state.fixed
        target = available * estimate // used.total
        extra = max(extra + 1, available - target)
        fitter.fit(items, available, state.fixed, extra)
    raise BudgetError(
        f"the formatted context is still {over} tokens over the {available} available after "
        f"{VERIFY_ROUNDS} rounds of cutting",
        overage=over,
        available=available,
    )


def render(live: list[Item], measurer: Measurer) -> Formatted:
    """The kept items as system prompt, history messages and current message."""
    by_place: dict[str, list[Item]] = {}
    for item in sorted(live, key=order_key):
        by_place.setdefault(item.placement, []).append(item)
    system = _join(by_place.get("system", []), measurer)
    history: list[Message] = []
    wrappers: list[str] = []
    before = _join(by_place.get("before_history", []), measurer)
    if before:
        history.append(Message.of("user", before))
        wrappers.append(before)
    for item in by_place.get("history", []):
        block = item.block
        history.append(
            Message(
                role=block.role or "user",
                content=block.content,
                context_json=block.provenance.metadata.get("context_json"),
            )
        )
    after = _join(by_place.get("after_history", []), measurer)
    if after:
        history.append(Message.of("user", after))
        wrappers.append(after)
    event_items = by_place.get("event", [])
    extra: list[Part] = [
        p
        for i in event_items
        for p in i.block.content
        if not isinstance(p, TextPart | ToolResultPart)
    ]
    # The event's record, with what other current-message blocks record (working-set files).
    recorded = merge_context_json(
        i.block.provenance.metadata.get("context_json") for i in event_items
    )
    current = Message(
        role="user",
        content=(TextPart(text=_join(event_items, measurer)), *extra),
        context_json=recorded,
    )
    # The stable prefix: system + history up to the current message, less the dynamic
    # after-history wrapper.
    prefix = hashlib.sha256(system.encode("utf-8", "surrogatepass"))
    if before:
        prefix.update(b"\x00" + before.encode("utf-8", "surrogatepass"))
    for item in by_place.get("history", []):
        prefix.update(f"\x00{item.block.role}\x00{item.block.hash}".encode())
    return Formatted(
        system_prompt=system,
        history=tuple(history),
        current=current,
        wrappers=tuple(wrappers),
        after_history=after,
        prefix_sha256=prefix.hexdigest(),
    )


def _join(items: list[Item], measurer: Measurer) -> str:
    if not items:
        return ""
    parts = [measurer.render(i) for i in items if i.block.body]
    return measurer.formatter(items[0]).separator.join(parts)


def usage(state: InFlight, measurer: Measurer, out: Formatted, live: Sequence[Item]) -> BudgetUsage:
    """Exact usage of the final text. History messages are the blocks' own parts, so their
    memoized counts are reused; the before/after-history wrappers are counted afresh. Tool
    definitions count with the system prompt: both are the static head of a request."""
    info, counter = state.model.info, measurer.counter
    overhead = info.message_overhead
    system = counter.count(out.system_prompt) + overhead if out.system_prompt else 0
    system += state.tool_tokens
    hist = sum(i.cost for i in live if i.placement == "history")
    hist += sum(counter.count(w) + overhead for w in out.wrappers)
    event = measurer.parts(out.current.content) + overhead + info.reply_overhead
    return BudgetUsage(system_prompt=system, history=hist, event=event, total=system + hist + event)


def after_history_tokens(state: InFlight, measurer: Measurer) -> int:
    """What the dynamic after-history wrapper costs (it is not part of the stable prefix)."""
    out = state.formatted
    if out is None or not out.after_history:
        return 0
    return measurer.counter.count(out.after_history) + state.model.info.message_overhead

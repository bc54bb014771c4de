"""Format and verify: render the kept items into the three physical layers, then count the
final text exactly; if BPE merges across joins put it over, cut a little more and repeat."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from lamina.assembly.fit import Fitter
from lamina.assembly.measure import Measurer
from lamina.assembly.state import Formatted, InFlight, Item, order_key, total
from lamina.digests import KEPT, sha256
from lamina.errors import BudgetError
from lamina.model.budget import BudgetUsage
from lamina.model.chunked import Chunked
from lamina.model.event_context import merge_context_json
from lamina.model.messages import Message, Part, TextPart, part_text
from lamina.records import ModelInfo

#: How many times formatting is re-checked against the exact count before giving up.
VERIFY_ROUNDS = 8


def format_within(state: InFlight, measurer: Measurer, fitter: Fitter) -> None:
    """The format phase: ``state.formatted`` and its exact ``state.used``.

    The exact count can exceed the piecewise estimate (BPE merges across joins); when that puts
    the text over, shrink the estimate's target by the observed ratio and fit again. Fitting
    only cuts, and each round demands at least one token more, so this ends.
    """
    available = state.budget.available
    extra = 0
    for _ in range(VERIFY_ROUNDS):
        by_place = live_by_placement(state, fitter)
        memo = fitter.memo()
        if memo is not None and memo.get("live") is not by_place.get("history"):
            memo = None
        out = render(by_place, measurer, memo)
        used = usage(
            state, measurer, out, by_place.get("history", []), memo, by_place.get("event", [])
        )
        over = used.total - available
        if over <= 0:
            state.formatted, state.used, state.live = out, used, by_place
            state.history_clean, state.history_memo = fitter.clean, memo
            return
        target = available * fitter.estimate(state.fixed) // used.total
        extra = max(extra + 1, available - target)
        fitter.fit(available, state.fixed, extra)
    raise BudgetError(
        f"the formatted context is still {over} tokens over the {available} available after "
        f"{VERIFY_ROUNDS} rounds of cutting",
        overage=over,
        available=available,
    )


def live_by_placement(state: InFlight, fitter: Fitter) -> dict[str, list[Item]]:
    """The kept items of each placement in output order, gap markers in their places."""
    history = fitter.live_history()
    out = {
        p: history if p == "history" and history is not None else [i for i in m if i.live]
        for p, m in state.by_placement.items()
    }
    for marker in fitter.markers if history is None else ():
        live = out.setdefault(marker.placement, [])
        live.insert(bisect_left(live, order_key(marker), key=order_key), marker)
    return out


def history_message(item: Item) -> tuple[Message, bytes]:
    """A kept history item's message and its share of the stable prefix's hash (kept
    between calls while the item is pristine)."""
    block = item.block
    message = Message(
        role=block.role or "user",
        content=block.content,
        context_json=block.provenance.metadata.get("context_json"),
    )
    seal = f"\x00{block.role}\x00{block.hash}".encode()
    if block is item.base:
        item.memo_message, item.memo_seal = message, seal
    return message, seal


def _seal(item: Item) -> bytes:
    if item.memo_message is not None and item.block is item.base:
        return item.memo_seal
    return history_message(item)[1]


def _start(system: str, before: str) -> Any:
    """The stable prefix's hash fed with what comes before the history messages."""
    prefix = sha256(system.encode("utf-8", "surrogatepass"), short=KEPT)
    if before:
        prefix.update(b"\x00" + before.encode("utf-8", "surrogatepass"))
    return prefix


def _history(
    items: list[Item], memo: dict[str, Any] | None, head: tuple[str, str]
) -> tuple[Chunked[Message], Any]:
    """The kept history's messages and the stable prefix's hash fed with ``head`` (system
    prompt, before-history wrapper) and them: from ``memo`` when it has them for the same
    items, extended from its ``base`` (the memo of the history these items grew from: only
    the new items are looked at), else made item by item."""
    messages: Chunked[Message] | None = None
    if memo is not None:
        messages = memo.get("messages")
        known = memo.get("prefix")
        if messages is not None and known is not None and known[0] == head:
            return messages, known[1]
    if messages is not None:  # the same messages after another system prompt
        prefix = _start(*head)
        prefix.update(b"".join(map(_seal, items)))
    else:
        start, before, prefix = 0, None, None
        base = memo.get("base") if memo is not None else None
        if base is not None and base["n"] <= len(items) and base["prefix"][0] == head:
            start, before, prefix = base["n"], base["messages"], base["prefix"][1].copy()
        made: list[Message] = []
        seals: list[bytes] = []
        for item in items[start:] if start else items:
            if item.memo_message is not None and item.block is item.base:
                made.append(item.memo_message)
                seals.append(item.memo_seal)
            else:
                message, seal = history_message(item)
                made.append(message)
                seals.append(seal)
        # A grown history shares the chunks of the one it grew from (no copy of it).
        messages = before.grown(made) if before is not None else Chunked(made)
        if prefix is None:
            prefix = _start(*head)
        prefix.update(b"".join(seals))
    if memo is not None:
        memo["messages"], memo["prefix"] = messages, (head, prefix)
    return messages, prefix


def render(
    by_place: dict[str, list[Item]], measurer: Measurer, memo: dict[str, Any] | None = None
) -> Formatted:
    """The kept items as system prompt, history messages and current message."""
    system = measurer.joined(by_place.get("system", []))
    wrappers: list[str] = []
    before = measurer.joined(by_place.get("before_history", []))
    # The stable prefix: system + history up to the current message, less the dynamic
    # after-history wrapper.
    messages, prefix = _history(by_place.get("history", []), memo, (system, before))
    after = measurer.joined(by_place.get("after_history", []))
    history = messages
    if before:
        history = Chunked.joined([(Message.of("user", before),), history])
        wrappers.append(before)
    if after:
        history = Chunked.joined([history, (Message.of("user", after),)])
        wrappers.append(after)
    return Formatted(
        system_prompt=system,
        history=history,
        current=current_message(by_place.get("event", []), measurer),
        wrappers=tuple(wrappers),
        after_history=after,
        prefix_sha256=prefix.hexdigest(),
    )


def current_message(items: list[Item], measurer: Measurer) -> Message:
    """The current message: the event's items as rendered and joined, then their parts
    without text (images, tool calls), with the event's record merged with what other
    current-message blocks record (working-set files)."""
    extra: list[Part] = [p for i in items for p in i.block.content if part_text(p) is None]
    recorded = merge_context_json(i.block.provenance.metadata.get("context_json") for i in items)
    return Message(
        role="user",
        content=(TextPart(text=measurer.joined(items, keep=False)), *extra),
        context_json=recorded,
    )


def _current_text(items: list[Item], measurer: Measurer, text: str) -> int:
    """The current message's text tokens, exact: ``text`` (its blocks as rendered, joined
    by their separator) counted before, else counted in pieces where that is exact
    (``TokenCounter.count_joined``: each block was counted when measured), so the event's
    content is not tokenized twice."""
    counter = measurer.counter
    found = counter.known(text)
    if found is not None:
        return found
    if not items:
        return counter.count(text)
    separator = measurer.formatter(items[0]).separator
    return counter.count_joined(measurer.pieces(items), separator, text)


def usage(
    state: InFlight,
    measurer: Measurer,
    out: Formatted,
    history: Sequence[Item],
    memo: dict[str, Any] | None = None,
    event: list[Item] | None = None,
) -> BudgetUsage:
    """Exact usage of the final text. History messages are the blocks' own parts, so their
    memoized counts are reused; the before/after-history wrappers are counted afresh; the
    current message's text from ``event``, its items (``_current_text``). Tool definitions
    count with the system prompt: both are the static head of a request."""
    info, counter = state.model.info, measurer.counter
    overhead = info.message_overhead
    # The system prompt and the wrappers are the same strings while unchanged (``joined``).
    system = counter.count_recurring(out.system_prompt) + overhead if out.system_prompt else 0
    system += state.tool_tokens
    if memo is None:
        hist = total(history)
    elif "cost" in memo:
        hist = memo["cost"]
    else:
        base = memo.get("base")
        if base is not None and base["cost"] is not None and base["n"] <= len(history):
            hist = memo["cost"] = base["cost"] + total(history[base["n"] :])
        else:
            hist = memo["cost"] = total(history)
    hist += sum(counter.count_recurring(w) + overhead for w in out.wrappers)
    tokens = current_tokens(out.current, event, measurer, info)
    return BudgetUsage(
        system_prompt=system, history=hist, event=tokens, total=system + hist + tokens
    )


def current_tokens(
    current: Message, event: list[Item] | None, measurer: Measurer, info: ModelInfo
) -> int:
    """What the current message costs, exactly, with the reply's priming: its text from
    ``event``, its items, when given (``_current_text``), its other parts and its framing."""
    content = current.content
    first = content[0]  # (``current_message`` makes it the joined text of the event's blocks)
    if event is None or not isinstance(first, TextPart):
        text = measurer.parts(content[:1])
    else:
        text = _current_text(event, measurer, first.text)
    framing = measurer.framing(content, info.message_overhead)
    return text + measurer.parts(content[1:]) + framing + info.reply_overhead


def after_history_tokens(state: InFlight, measurer: Measurer) -> int:
    """What the dynamic after-history wrapper costs (it is not part of the stable prefix)."""
    out = state.formatted
    if out is None or not out.after_history:
        return 0
    tokens = measurer.counter.count_recurring(out.after_history)  # (counted in ``usage``)
    return tokens + state.model.info.message_overhead

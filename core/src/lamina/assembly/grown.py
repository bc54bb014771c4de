"""Grown: a stream's call whose previous call kept every block whole, and whose history has
since only grown at its end, is assembled from that call's context. Only what is new is made:
the new history messages (measured, hashed into the stable prefix, reported) and the current
message; place, fit, format and report do not run.

Anything else takes the full pipeline: a block changed or gone, another request or budget,
a cap or tool-result edit that could apply, a warning, or a request that would not fit whole
by the same estimate and exact count the full pipeline makes. That pipeline gives the same
context (``tests/test_grown.py`` holds the two to the same bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.assembly.fit import Fitter
from lamina.assembly.format import current_message, current_tokens, history_message
from lamina.assembly.layout import EVENT, FIXED, HISTORY, Layout, Whole, has_tools
from lamina.assembly.measure import Measurer, measure_item
from lamina.assembly.place import new_item
from lamina.assembly.report import context, kept_report
from lamina.assembly.rules import Rules
from lamina.assembly.state import ORIGINAL, TOKENS, InFlight, Item, total
from lamina.assembly.tool_json import with_tools
from lamina.assembly.tool_results import smallest_cap
from lamina.config import LaminaConfig
from lamina.model.blocks import Block
from lamina.model.budget import BudgetUsage
from lamina.model.chunked import Chunked
from lamina.model.context import AssembledContext
from lamina.model.messages import Message
from lamina.model.report import AssemblyReport, LayerReport, StablePrefix

#: The placements a ``Whole`` call may use (wrappers around history are not reused).
_PLACEMENTS = frozenset(("system", "history", "event"))


def request_key(state: InFlight) -> tuple[Any, ...]:
    """What decides a call's context besides its blocks (and the stream: session, model)."""
    r = state.request
    return (
        state.budget,
        state.tools,
        state.overrides,
        state.history_source,
        r.role,
        r.provider,
        r.permissions,
        r.workspace_path,
        r.parent_turn_id,
        r.toolset_name,
        r.model_config,
    )


def grown(
    state: InFlight, whole: Whole, measurer: Measurer, rules: Rules
) -> tuple[AssembledContext, Whole] | None:
    """The context of a gathered call grown from ``whole``, and what the next call may grow
    from; ``None`` when the full pipeline must run (it would cut or edit something, or the
    call differs from ``whole`` 's in more than new history at the end)."""
    if state.verbose or state.warnings or state.exclusions or whole.key != request_key(state):
        return None
    gathered = state.gathered
    if len(gathered) != len(whole.runs):
        return None
    added: Sequence[Block] = ()
    source = ""
    current: list[Item] = []
    for run, (key, kind, blocks) in zip(gathered, whole.runs, strict=True):
        if run.key != key:
            return None
        if kind == EVENT:
            for block in run.blocks:
                item = new_item(block, rules=rules, plugin=run.plugin)
                if item.placement != "event" or item.spec.order <= whole.order:
                    return None
                current.append(item)
        elif run.blocks is not blocks:
            if kind != HISTORY or run.prior is not blocks:
                return None
            added, source = run.blocks[len(blocks) :], run.plugin
    overhead = state.model.info.message_overhead
    new: list[Item] = []
    for block in added:
        item = new_item(block, rules=rules, plugin=source)
        if item.spec.name != whole.layer or item.placement != "history":
            return None
        if block.max_tokens is not None:
            return None
        measure_item(item, measurer, overhead)
        if item.original_tokens > whole.floor and has_tools(item):  # (it would be capped)
            return None
        new.append(item)
    for item in current:
        measure_item(item, measurer, overhead)
        cap = item.block.max_tokens
        if cap is not None and item.tokens > cap:
            return None
    current.sort(key=_layer_order)  # (stable: as gathered within a layer order)
    grew = total(new)
    available = state.budget.available
    if whole.estimate + grew + total(current) > available:
        return None
    message = current_message(current, measurer)
    before = whole.context.token_budget.used
    history = before.history + grew
    event = current_tokens(message, current, measurer, state.model.info)
    spent = before.system_prompt + history + event
    if spent > available:
        return None
    used = BudgetUsage(
        system_prompt=before.system_prompt, history=history, event=event, total=spent
    )
    return _made(state, whole, new, current, message, used)


def _made(
    state: InFlight,
    whole: Whole,
    new: list[Item],
    current: list[Item],
    message: Message,
    used: BudgetUsage,
) -> tuple[AssembledContext, Whole]:
    """The grown context, and the ``Whole`` for the next call."""
    messages, reports, prefix, layers = whole.messages, whole.reports, whole.prefix, whole.layers
    if new:
        made, seals, listed = [], [], []
        for item in new:
            made_message, seal = history_message(item)
            made.append(made_message)
            seals.append(seal)
            listed.append(kept_report(item))
        messages, reports = messages.grown(made), reports.grown(listed)
        prefix = prefix.copy()
        prefix.update(b"".join(seals))
        layers = _grown_layers(whole, new)
    previous = whole.context
    old = previous.report
    assert old.stable_prefix is not None, "a whole call's report has its stable prefix"
    report = AssemblyReport(
        blocks=Chunked.joined([whole.head, reports, [kept_report(i) for i in current]]),
        layers=layers + _current_layers(current),
        tokenizer=old.tokenizer,
        stable_prefix=StablePrefix(
            tokens=used.system_prompt + used.history,
            sha256=with_tools(prefix.hexdigest(), state.tools),
            tools_sha256=old.stable_prefix.tools_sha256,
        ),
        strategy=old.strategy,
        history_source=state.history_source,
        timings_ms=state.timings,
    )
    ctx = context(
        state,
        system_prompt=previous.system_prompt,
        history=messages,
        current=message,
        used=used,
        report=report,
        system_context_json=previous.system_context_json,
    )
    runs = []
    for run, (_, kind, _) in zip(state.gathered, whole.runs, strict=True):
        runs.append((run.key, kind, run.blocks))
    kept = Whole(
        context=ctx,
        key=whole.key,
        runs=runs,
        layer=whole.layer,
        order=whole.order,
        estimate=whole.estimate + total(new),
        messages=messages,
        prefix=prefix,
        head=whole.head,
        reports=reports,
        layers=layers,
        floor=whole.floor,
    )
    return ctx, kept


def _grown_layers(whole: Whole, new: list[Item]) -> tuple[LayerReport, ...]:
    """The layer reports outside the current message, the history's with ``new`` in it."""
    out = []
    for layer in whole.layers:
        if layer.layer == whole.layer:
            layer = LayerReport(
                layer=layer.layer,
                placement=layer.placement,
                blocks=layer.blocks + len(new),
                kept=layer.kept + len(new),
                tokens=layer.tokens + sum(map(TOKENS, new)),
                original_tokens=layer.original_tokens + sum(map(ORIGINAL, new)),
                cap=layer.cap,
            )
        out.append(layer)
    return tuple(out)


def _current_layers(current: list[Item]) -> tuple[LayerReport, ...]:
    """The reports of the current message's layers (``current`` is in layer order, after
    every other layer's)."""
    out: list[LayerReport] = []
    start = 0
    for n, item in enumerate(current):
        if n + 1 == len(current) or current[n + 1].spec.name != item.spec.name:
            members = current[start : n + 1]
            out.append(
                LayerReport(
                    layer=item.spec.name,
                    placement="event",
                    blocks=len(members),
                    kept=len(members),
                    tokens=sum(map(TOKENS, members)),
                    original_tokens=sum(map(ORIGINAL, members)),
                    cap=None,
                )
            )
            start = n + 1
    return tuple(out)


def _layer_order(item: Item) -> int:
    return item.spec.order


def kept_whole(
    state: InFlight,
    ctx: AssembledContext,
    fitter: Fitter,
    layout: Layout,
    rules: Rules,
    config: LaminaConfig,
) -> Whole | None:
    """What the stream's next call may grow from, when this call (the full pipeline's) kept
    every block whole, with nothing that a grown call could not make again: no cut, edit,
    cap or warning, no wrapper around history, one history layer between the system prompt's
    blocks and the current message's."""
    live = state.live
    if (
        state.verbose
        or state.warnings
        or state.exclusions
        or fitter.cuts
        or fitter.touched
        or state.markers
        or config.tool_results.stub_after > 0
        or rules.caps(state.budget.available)
        or not _PLACEMENTS.issuperset(live)
    ):
        return None
    memo = state.history_memo
    history = live.get("history")
    buckets = state.history_buckets
    if not history or memo is None or buckets is None or len(buckets) != 1:
        return None
    bucket = buckets[0]
    head, event = live.get("system", []), live.get("event", [])
    if (head and head[-1].index > history[0].index) or (
        event and event[0].index < history[-1].index
    ):
        return None  # (the report would list the blocks in another order)
    runs = []
    for run in state.gathered:
        placements = {i.placement for i in layout.runs[run.key].items}
        if "event" in placements:
            kind = EVENT if placements == {"event"} else ""
        else:
            kind = HISTORY if "history" in placements else FIXED
        if not kind:
            return None
        runs.append((run.key, kind, run.blocks))
    if [kind for _, kind, _ in runs].count(HISTORY) != 1:
        return None
    report = ctx.report
    assert bucket.layer is not None
    return Whole(
        context=ctx,
        key=request_key(state),
        runs=runs,
        layer=bucket.layer,
        order=bucket.order,
        estimate=fitter.estimate(state.fixed) - total(event),
        messages=memo["messages"],
        prefix=memo["prefix"][1],
        head=report.blocks[: len(head)],
        reports=memo["reports"],
        layers=tuple(layer for layer in report.layers if layer.placement != "event"),
        floor=smallest_cap(config.tool_results, state.budget.available),
    )

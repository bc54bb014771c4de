"""Report: what was kept, cut or summarized and why, per block and per layer, what was dropped
per layer (each block too in a verbose report), with the stable prefix; then the assembled
context itself."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from lamina.assembly.rules import Rules
from lamina.assembly.state import ORIGINAL, TOKENS, Cut, InFlight, Item, order_key
from lamina.assembly.tool_json import tools_digest, with_tools
from lamina.model.budget import BudgetUsage
from lamina.model.chunked import Chunked
from lamina.model.context import AssembledContext
from lamina.model.event_context import merge_context_json
from lamina.model.messages import Message
from lamina.model.report import (
    AssemblyReport,
    BlockReport,
    DroppedReport,
    LayerReport,
    StablePrefix,
    TokenizerReport,
)
from lamina.records import Exclusion


def report(state: InFlight, rules: Rules, after_history_tokens: int) -> AssembledContext:
    """The report phase: the context with its report (timings up to this phase)."""
    out, used = state.formatted, state.used
    assert out is not None and used is not None, "report runs after format"
    model = state.model
    listed: list[Sequence[BlockReport]]
    if state.verbose:  # every item, the kept ones' reports made once while they are pristine
        items = state.all_items()  # (in output order: only gap markers need sorting in)
        if state.markers:
            items = sorted([*items, *state.markers], key=order_key)
        listed = [[kept_report(i) for i in items]]
    else:
        listed = _kept_reports(state.live, state.history_memo)
    dropped = _dropped_reports(state, rules)
    exclusions = [_exclusion_report(x, plugin, rules) for x, plugin in state.exclusions]
    assembly_report = AssemblyReport(
        blocks=Chunked.joined([*listed, exclusions]),
        layers=_layer_reports(state, dropped, rules),
        dropped=dropped,
        verbose=state.verbose,
        warnings=tuple(state.warnings),
        tokenizer=TokenizerReport(
            name=model.tokenizer.name, plugin=model.tokenizer_plugin, exact=model.tokenizer.exact
        ),
        stable_prefix=StablePrefix(
            tokens=used.system_prompt + used.history - after_history_tokens,
            sha256=with_tools(out.prefix_sha256, state.tools),
            tools_sha256=tools_digest(state.tools),
        ),
        strategy=state.strategy,
        history_source=state.history_source,
        timings_ms=state.timings,
    )
    return context(
        state,
        system_prompt=out.system_prompt,
        history=out.history,
        current=out.current,
        used=used,
        report=assembly_report,
        system_context_json=_system_context_json(state),
    )


def context(
    state: InFlight,
    *,
    system_prompt: str,
    history: Sequence[Message],
    current: Message,
    used: BudgetUsage,
    report: AssemblyReport,
    system_context_json: dict[str, Any],
) -> AssembledContext:
    """The assembled context of ``state`` 's request: the three physical layers, the tools,
    the budget with ``used`` spent, and the report."""
    request, model = state.request, state.model
    return AssembledContext(
        system_prompt=system_prompt,
        history=history,
        current_message=current,
        tools=state.tools,
        model=request.model,
        provider=request.provider or model.info.provider or "",
        model_config=request.model_config,
        token_budget=state.budget.spent(used),
        session_label=request.session_label,
        role=request.role,
        workspace_path=request.workspace_path,
        parent_turn_id=request.parent_turn_id,
        toolset_name=request.toolset_name,
        permissions_granted=request.permissions,
        source_event_id=request.event.id,
        system_context_json=system_context_json,
        report=report,
        model_info=model.info,
    )


def _kept_reports(
    live: dict[str, list[Item]], memo: dict[str, Any] | None
) -> list[Sequence[BlockReport]]:
    """The kept items' reports in output order, in runs to join (placements follow layer
    order, so their runs only need sorting when a layer placed elsewhere interleaves them);
    the kept history's from ``memo`` when it has them."""
    runs = sorted((m for m in live.values() if m), key=lambda m: order_key(m[0]))
    if any(order_key(a[-1]) > order_key(b[0]) for a, b in pairwise(runs)):
        return [[kept_report(i) for i in sorted((i for m in runs for i in m), key=order_key)]]
    out: list[Sequence[BlockReport]] = []
    for run in runs:
        if memo is not None and run is memo.get("live"):
            if "reports" not in memo:
                memo["reports"] = history_reports(run, memo.get("base"))
            out.append(memo["reports"])
        else:
            out.append([kept_report(i) for i in run])
    return out


def history_reports(run: list[Item], base: dict[str, Any] | None) -> Chunked[BlockReport]:
    """The kept history's reports: those of the history it grew from (``base``), shared,
    then the new items', so a session that grew by a turn makes and copies only the turn's."""
    if base is None or base["reports"] is None or base["n"] > len(run):
        return Chunked([kept_report(i) for i in run])
    grown: Chunked[BlockReport] = base["reports"].grown([kept_report(i) for i in run[base["n"] :]])
    return grown


def kept_report(item: Item) -> BlockReport:
    """An item's report, made once while the item is pristine (kept as gathered); a cut or
    dropped item's is made anew."""
    pristine = item.status == "kept" and item.block is item.base
    if pristine and item.memo_report is not None:
        found: BlockReport = item.memo_report
        return found
    made = block_report(item)
    if pristine:
        item.memo_report = made
    return made


def block_report(item: Item) -> BlockReport:
    """One block's fate; a block its provider already cut shows as truncated, with why."""
    status, reason = item.status, item.reason
    pre = item.block.pre_truncated
    if pre is not None and status != "dropped":
        reason = f"{pre}; {reason}" if reason else pre
        if status == "kept":
            status = "truncated"
    return BlockReport(
        id=item.block.id,
        layer=item.spec.name,
        placement=item.placement,
        plugin=item.plugin,
        status=status,
        tokens=item.tokens,
        original_tokens=item.original_tokens,
        path=item.block.provenance.path,
        strategy=item.strategy,
        reason=reason,
        hash=item.block.hash,
        source_id=item.block.provenance.source_id,
        details={k: v for k, v in item.block.provenance.metadata.items() if k != "context_json"},
    )


def _exclusion_report(x: Exclusion, plugin: str, rules: Rules) -> BlockReport:
    spec = rules.registry.layers.get(x.layer)
    return BlockReport(
        id=x.id,
        layer=x.layer,
        placement="" if spec is None else rules.placement(spec.record),
        plugin=plugin,
        status="dropped",
        tokens=0,
        original_tokens=0,
        path=x.path,
        reason=x.reason,
    )


def _dropped_reports(state: InFlight, rules: Rules) -> tuple[DroppedReport, ...]:
    """What fitting dropped, per layer (in layer order): how many blocks, the tokens they
    held, the first and last in output order, and the reasons (each once, in order)."""
    by_layer: dict[str, list[Cut]] = {}
    for cut in state.cuts:
        by_layer.setdefault(cut.layer, []).append(cut)
    out = []
    for name in sorted(by_layer, key=rules.order.__getitem__):
        cuts = by_layer[name]
        first = min((c.first for c in cuts), key=_at)
        last = max((c.last for c in cuts), key=_at)
        reasons = dict.fromkeys(c.first.reason or "" for c in cuts)
        out.append(
            DroppedReport(
                layer=name,
                placement=first.placement,
                blocks=sum(c.count for c in cuts),
                original_tokens=sum(c.original for c in cuts),
                first_id=first.block.id,
                last_id=last.block.id,
                reasons=tuple(r for r in reasons if r),
            )
        )
    return tuple(out)


def _at(item: Item) -> int:
    return item.index


def _layer_reports(
    state: InFlight, dropped: Sequence[DroppedReport], rules: Rules
) -> tuple[LayerReport, ...]:
    out = []
    cut = {d.layer: d for d in dropped}
    by_layer = state.by_layer
    clean = {b.layer for b in state.history_buckets or ()} if state.history_clean else set()
    for name in sorted(by_layer, key=rules.order.__getitem__):
        members = by_layer[name]
        gone = cut.get(name)
        if name in clean and state.history_buckets is not None:
            # As placed but for one cut: the sums come from the buckets and the cut.
            original = sum(b.original_tokens() for b in state.history_buckets)
            tokens = original - (gone.original_tokens if gone is not None else 0)
        else:
            original, tokens = sum(map(ORIGINAL, members)), sum(map(TOKENS, members))
        out.append(
            LayerReport(
                layer=name,
                placement=members[0].placement,
                blocks=len(members),
                kept=len(members) - (gone.blocks if gone is not None else 0),
                tokens=tokens,
                original_tokens=original,
                cap=state.caps.get(name),
            )
        )
    return tuple(out)


def _system_context_json(state: InFlight) -> dict[str, Any]:
    """The system blocks' ``context_json`` provenance, deep-merged in order (what was kept)."""
    kept = state.live.get("system", [])
    return merge_context_json(i.block.provenance.metadata.get("context_json") for i in kept) or {}

"""Report: what was kept, cut, summarized or dropped and why, per block and per layer, with
the stable prefix; then the assembled context itself."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from attrs import evolve

from lamina.assembly.rules import Rules
from lamina.assembly.state import InFlight, Item, order_key
from lamina.model.context import AssembledContext
from lamina.model.event_context import merge_context_json
from lamina.model.report import (
    AssemblyReport,
    BlockReport,
    LayerReport,
    StablePrefix,
    TokenizerReport,
)
from lamina.model.request import Tool
from lamina.records import Exclusion
from lamina.serde import unstructure


def report(state: InFlight, rules: Rules, after_history_tokens: int) -> AssembledContext:
    """The report phase: the context with its report (timings up to this phase)."""
    out, used = state.formatted, state.used
    assert out is not None and used is not None, "report runs after format"
    request, model = state.request, state.model
    items = state.items
    budget = evolve(state.budget, used=used, remaining=state.budget.available - used.total)
    assembly_report = AssemblyReport(
        blocks=(
            *(block_report(i) for i in sorted([*items, *state.markers], key=order_key)),
            *(_exclusion_report(x, plugin, rules) for x, plugin in state.exclusions),
        ),
        layers=_layer_reports(items, state.caps, rules),
        warnings=tuple(state.warnings),
        tokenizer=TokenizerReport(
            name=model.tokenizer.name, plugin=model.tokenizer_plugin, exact=model.tokenizer.exact
        ),
        stable_prefix=StablePrefix(
            tokens=used.system_prompt + used.history - after_history_tokens,
            sha256=_with_tools(out.prefix_sha256, state.tools),
        ),
        strategy=state.strategy,
        history_source=state.history_source,
        timings_ms=state.timings,
    )
    return AssembledContext(
        system_prompt=out.system_prompt,
        history=out.history,
        current_message=out.current,
        tools=state.tools,
        model=request.model,
        provider=request.provider or model.info.provider or "",
        model_config=request.model_config,
        token_budget=budget,
        session_label=request.session_label,
        role=request.role,
        workspace_path=request.workspace_path,
        parent_turn_id=request.parent_turn_id,
        toolset_name=request.toolset_name,
        permissions_granted=request.permissions,
        source_event_id=request.event.id,
        system_context_json=_system_context_json(items),
        report=assembly_report,
        model_info=model.info,
    )


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


def _layer_reports(
    items: Sequence[Item], caps: dict[str, int], rules: Rules
) -> tuple[LayerReport, ...]:
    out = []
    names = sorted({i.spec.name for i in items}, key=lambda n: rules.registry.layer(n).order)
    for name in names:
        members = [i for i in items if i.spec.name == name]
        out.append(
            LayerReport(
                layer=name,
                placement=members[0].placement,
                blocks=len(members),
                kept=sum(1 for i in members if i.live),
                tokens=sum(i.tokens for i in members),
                original_tokens=sum(i.original_tokens for i in members),
                cap=caps.get(name),
            )
        )
    return tuple(out)


def _with_tools(prefix_sha256: str, tools: Sequence[Tool]) -> str:
    """The stable prefix's hash, covering the tool definitions sent with it (if any)."""
    if not tools:
        return prefix_sha256
    definitions = json.dumps([unstructure(t) for t in tools], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{definitions}\x00{prefix_sha256}".encode()).hexdigest()


def _system_context_json(items: Sequence[Item]) -> dict[str, Any]:
    """The system blocks' ``context_json`` provenance, deep-merged in order (what was kept)."""
    kept = (i for i in sorted(items, key=order_key) if i.placement == "system" and i.live)
    return merge_context_json(i.block.provenance.metadata.get("context_json") for i in kept) or {}

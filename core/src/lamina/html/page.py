"""The page: the assembly report as one self-contained HTML document.

The budget as stacked bars (by physical layer, by conceptual layer, by block), the stable
prefix marked, the warnings, the tokenizer, and tables with every figure (timings are left out:
they differ run to run, and the page does not). Inline CSS only: no
script, no network (a Content-Security-Policy says so to the browser). Every figure is the
report's own (``AssembledContext.report`` and ``token_budget``) and also sits in a ``data-``
attribute so a test can read it back from the rendered page; everything that comes from
content (ids, paths, warnings) is escaped. The same context gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from lamina.html.shell import html_escape as esc
from lamina.html.shell import html_page
from lamina.html.style import REPORT
from lamina.model.context import AssembledContext
from lamina.model.report import BlockReport, DroppedReport, LayerReport, StablePrefix
from lamina.wording import counted

_R = TypeVar("_R", LayerReport, BlockReport)

#: Placement → the physical layer of the budget that counts it, in request order.
PHYSICAL = {
    "system": "system",
    "before_history": "history",
    "history": "history",
    "after_history": "history",
    "event": "event",
}
PHYSICAL_ORDER = ("system", "history", "event")
_PLACEMENT_ORDER = {p: i for i, p in enumerate(PHYSICAL)}
#: Shades per physical layer, cycled over the conceptual layers placed there.
SHADES = {
    "system": ("#2f5fa7", "#7fa6de", "#4f7fc4", "#a9c4ea", "#3a6bb8"),
    "history": ("#2e8b57", "#7cc79b", "#4aa571", "#a6dcbc", "#3b9a65"),
    "event": ("#c8702a", "#efb27d", "#dd8a45", "#f5cda8", "#d27c36"),
    "": ("#8a8a8a",),
}
#: The physical-layer bar's colours: darker than every shade, so each bar reads on its own.
PLACEMENT_COLORS = {"system": "#1d3f73", "history": "#1e6b43", "event": "#a0561c"}
STATUSES = ("kept", "truncated", "summarized", "dropped")

__all__ = ["esc", "render_html"]


def render_html(ctx: AssembledContext) -> str:
    """The page for one assembled context."""
    report, budget = ctx.report, ctx.token_budget
    tok = report.tokenizer
    colors = _layer_colors(report.layers, report.blocks)
    attrs = {
        "data-model": ctx.model,
        "data-provider": ctx.provider,
        "data-available": budget.available,
        "data-used": budget.used.total,
        "data-remaining": budget.remaining,
        "data-model-limit": budget.model_limit,
        "data-reserve-response": budget.reserve_response,
        "data-reserve-tools": budget.reserve_tools,
        "data-tokenizer": tok.name if tok else "",
        "data-tokenizer-exact": "" if tok is None else str(tok.exact).lower(),
        "data-strategy": report.strategy,
    }
    title = f"Lamina: {ctx.model}, {budget.used.total:,} of {budget.available:,} tokens"
    body = [
        f'<main id="report"{_attrs(attrs)}>',
        _header(ctx),
        _budget_section(ctx, colors),
        _warnings_section(report.warnings),
        _layers_table(report.layers, colors),
        _blocks_table(report.blocks, _summed(ctx), colors),
        "</main>",
    ]
    return html_page(title, body, style=REPORT)


def _attrs(values: dict[str, object]) -> str:
    return "".join(f' {name}="{esc(value)}"' for name, value in values.items())


def _header(ctx: AssembledContext) -> str:
    report, budget = ctx.report, ctx.token_budget
    tok = report.tokenizer
    if tok is None:
        counted = "no tokenizer recorded"
    else:
        kind = "exact counts" if tok.exact else "estimated counts"
        counted = f"tokenizer {tok.name} ({tok.plugin}, {kind})"
    facts = [
        f"model {ctx.model}" + (f" ({ctx.provider})" if ctx.provider else ""),
        f"session {ctx.session_label}" if ctx.session_label else "",
        f"role {ctx.role}",
        f"strategy {report.strategy}" if report.strategy else "",
        f"history from {report.history_source}" if report.history_source else "",
    ]
    meta = " · ".join(esc(f) for f in facts if f)
    return (
        "<header><h1>Assembly report</h1>"
        f'<p class="meta">{meta}</p>'
        f'<p class="meta" id="tokenizer">{esc(counted)}</p>'
        f'<p class="summary"><strong>{budget.used.total:,}</strong> of '
        f"<strong>{budget.available:,}</strong> tokens used, {budget.remaining:,} remaining "
        f"(model limit {budget.model_limit:,}; reserved for the response "
        f"{budget.reserve_response:,}, for tools {budget.reserve_tools:,})</p></header>"
    )


def _budget_section(ctx: AssembledContext, colors: dict[str, str]) -> str:
    report, budget = ctx.report, ctx.token_budget
    scale = max(1, budget.available)
    used = {
        "system": budget.used.system_prompt,
        "history": budget.used.history,
        "event": budget.used.event,
    }
    placement = [
        _seg(
            f"place {p}",
            used[p],
            scale,
            f"{p}: {used[p]:,} tokens",
            {"data-placement": p},
            color=PLACEMENT_COLORS[p],
            label=f"{p} {used[p]:,}",
        )
        for p in PHYSICAL_ORDER
    ]
    placement.append(_remaining(budget.remaining, scale))
    layers = sorted(report.layers, key=lambda lr: _PLACEMENT_ORDER.get(lr.placement, 99))
    by_layer = _with_overhead(
        layers,
        used,
        scale,
        lambda lr: _seg(
            "layer",
            lr.tokens,
            scale,
            f"{lr.layer} ({lr.placement}): {lr.tokens:,} of {lr.original_tokens:,} tokens, "
            f"{lr.kept} of {counted(lr.blocks, 'block')} kept",
            {"data-layer": lr.layer, "data-placement": lr.placement},
            color=colors.get(lr.layer),
            label=lr.layer,
        ),
    )
    by_layer.append(_remaining(budget.remaining, scale))
    live = sorted(
        (b for b in report.blocks if b.status != "dropped"),
        key=lambda b: _PLACEMENT_ORDER.get(b.placement, 99),
    )
    by_block = _with_overhead(live, used, scale, lambda b: _block_seg(b, scale, colors))
    by_block.append(_remaining(budget.remaining, scale))
    dropped = [b for b in report.blocks if b.status == "dropped"]
    summed = _summed(ctx)
    dropped_total = sum(b.original_tokens for b in dropped)
    dropped_total += sum(d.original_tokens for d in summed)
    rows = [
        _row("Physical layer", "bar-placement", placement),
        _row("Layer", "bar-layer", by_layer),
        _row("Block", "bar-block", by_block),
    ]
    if dropped_total or dropped or summed:
        own = dropped_total > scale
        left_scale = max(scale, dropped_total)
        note = " (own scale)" if own else ""
        rows.append(
            _row(
                f"Left out{note}",
                "bar-dropped",
                [
                    *(_dropped_seg(d, left_scale, colors) for d in summed),
                    *(_block_seg(b, left_scale, colors) for b in dropped),
                ],
            )
        )
    return (
        '<section id="budget"><h2>Budget</h2>'
        f'<p class="hint">Each bar is the {budget.available:,} tokens available; '
        "hover a segment for its figures.</p>"
        f'<div class="bars">{_prefix_marker(report.stable_prefix, scale)}{"".join(rows)}</div>'
        f"{_legend()}</section>"
    )


def _with_overhead(
    items: Sequence[_R], used: dict[str, int], scale: int, draw: Callable[[_R], str]
) -> list[str]:
    """Segments for ``items`` in physical-layer order, each physical layer closed by its
    overhead (separators, titles, message framing): what the budget counts beyond them."""
    out: list[str] = []
    for physical in PHYSICAL_ORDER:
        members = [i for i in items if PHYSICAL.get(i.placement) == physical]
        out.extend(draw(i) for i in members)
        overhead = used[physical] - sum(i.tokens for i in members)
        if overhead > 0:
            out.append(
                _seg(
                    "overhead",
                    overhead,
                    scale,
                    f"{physical}: {overhead:,} tokens of formatting and message framing",
                    {"data-placement": physical},
                )
            )
    return out


def _summed(ctx: AssembledContext) -> tuple[DroppedReport, ...]:
    """The dropped blocks the report sums up per layer (a verbose report lists each one in
    ``blocks`` instead)."""
    return () if ctx.report.verbose else ctx.report.dropped


def _dropped_figures(d: DroppedReport) -> tuple[str, dict[str, object]]:
    """What a per-layer sum of dropped blocks shows: its name and its ``data-`` figures."""
    name = d.first_id if d.blocks == 1 else f"{d.first_id} … {d.last_id}"
    data: dict[str, object] = {
        "data-dropped": d.layer,
        "data-layer": d.layer,
        "data-status": "dropped",
        "data-blocks": d.blocks,
        "data-first": d.first_id,
        "data-last": d.last_id,
        "data-original-tokens": d.original_tokens,
    }
    return f"{name} ({counted(d.blocks, 'block')})", data


def _dropped_seg(d: DroppedReport, scale: int, colors: dict[str, str]) -> str:
    name, data = _dropped_figures(d)
    tip = f"{name} ({d.layer}): dropped, {d.original_tokens:,} tokens"
    if d.reasons:
        tip += f"; {'; '.join(d.reasons)}"
    return _seg("block dropped", d.original_tokens, scale, tip, data, color=colors.get(d.layer))


def _block_seg(b: BlockReport, scale: int, colors: dict[str, str]) -> str:
    tokens = b.original_tokens if b.status == "dropped" else b.tokens
    tip = f"{b.id} ({b.layer}): {b.status}, {b.tokens:,} of {b.original_tokens:,} tokens"
    if b.reason:
        tip += f"; {b.reason}"
    return _seg(
        f"block {b.status}",
        tokens,
        scale,
        tip,
        {
            "data-block": b.id,
            "data-layer": b.layer,
            "data-status": b.status,
            "data-original-tokens": b.original_tokens,
        },
        color=colors.get(b.layer),
    )


def _seg(
    kind: str,
    tokens: int,
    scale: int,
    tip: str,
    extra: dict[str, object],
    *,
    color: str | None = None,
    label: str = "",
) -> str:
    style = f"width:{100 * tokens / scale:.4f}%"
    if color is not None:
        style += f";background-color:{color}"
        if _light(color):
            kind += " light"
    data = _attrs({"title": tip, **extra, "data-tokens": tokens})
    inner = f"<span>{esc(label)}</span>" if label else ""
    return f'<div class="seg {kind}" style="{style}"{data}>{inner}</div>'


def _remaining(tokens: int, scale: int) -> str:
    return _seg("remaining", tokens, scale, f"remaining: {tokens:,} tokens", {}, label="")


def _row(label: str, bar_id: str, segments: Iterable[str]) -> str:
    return (
        f'<div class="row"><span class="label">{esc(label)}</span>'
        f'<div class="bar" id="{bar_id}">{"".join(segments)}</div></div>'
    )


def _prefix_marker(prefix: StablePrefix | None, scale: int) -> str:
    if prefix is None:
        return (
            '<div class="row"><span class="label">Stable prefix</span>'
            '<span id="stable-prefix" class="none" data-tokens="0">none</span></div>'
        )
    width = f"{100 * prefix.tokens / scale:.4f}%"
    tip = f"stable prefix: {prefix.tokens:,} tokens, sha256 {prefix.sha256}"
    return (
        f'<div class="row"><span class="label">Stable prefix</span>'
        f'<div class="prefix-track"><div id="stable-prefix" class="prefix" style="width:{width}"'
        f"{_attrs({'title': tip, 'data-tokens': prefix.tokens, 'data-sha256': prefix.sha256})}>"
        f"<span>{prefix.tokens:,} tokens · sha256 {esc(prefix.sha256[:12])}…</span>"
        "</div></div></div>"
    )


def _legend() -> str:
    items = [f'<span class="key"><i class="swatch block {s}"></i>{s}</span>' for s in STATUSES] + [
        '<span class="key"><i class="swatch overhead"></i>formatting and framing</span>',
        '<span class="key"><i class="swatch remaining"></i>remaining</span>',
        '<span class="key"><i class="swatch prefix"></i>stable prefix (cached)</span>',
    ]
    return f'<p class="legend">{"".join(items)}</p>'


def _warnings_section(warnings: Sequence[str]) -> str:
    if not warnings:
        return '<section id="warnings"><h2>Warnings</h2><p class="none">None.</p></section>'
    items = "".join(f'<li class="warning">{esc(w)}</li>' for w in warnings)
    return f'<section id="warnings"><h2>Warnings ({len(warnings)})</h2><ul>{items}</ul></section>'


def _layers_table(layers: Sequence[LayerReport], colors: dict[str, str]) -> str:
    head = _head("layer", "placement", "#blocks", "#kept", "#tokens", "#original", "#cap")
    rows = []
    for lr in layers:
        data = {
            "data-layer": lr.layer,
            "data-placement": lr.placement,
            "data-tokens": lr.tokens,
            "data-original-tokens": lr.original_tokens,
        }
        swatch = f'<i class="swatch" style="background-color:{colors.get(lr.layer, "#888")}"></i>'
        cap = "" if lr.cap is None else f"{lr.cap:,}"
        rows.append(
            f"<tr{_attrs(data)}><td>{swatch}{esc(lr.layer)}</td><td>{esc(lr.placement)}</td>"
            f'<td class="n">{lr.blocks}</td><td class="n">{lr.kept}</td>'
            f'<td class="n">{lr.tokens:,}</td><td class="n">{lr.original_tokens:,}</td>'
            f'<td class="n">{cap}</td></tr>'
        )
    return (
        '<section id="layers"><h2>Layers</h2><table><thead><tr>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _blocks_table(
    blocks: Sequence[BlockReport], summed: Sequence[DroppedReport], colors: dict[str, str]
) -> str:
    head = _head("block", "layer", "plugin", "status", "#tokens", "#original", "why")
    rows = []
    for d in summed:  # each layer's dropped blocks, summed up
        name, data = _dropped_figures(d)
        rows.append(
            f'<tr class="dropped"{_attrs({**data, "data-tokens": 0})}><td>{esc(name)}</td>'
            f"<td>{esc(d.layer)}</td><td></td>"
            f'<td><i class="swatch block dropped" style="background-color:'
            f'{colors.get(d.layer, "#888")}"></i>dropped</td>'
            f'<td class="n">0</td><td class="n">{d.original_tokens:,}</td>'
            f"<td>{'; '.join(esc(r) for r in d.reasons)}</td></tr>"
        )
    for b in blocks:
        data = {
            "data-block": b.id,
            "data-layer": b.layer,
            "data-status": b.status,
            "data-tokens": b.tokens,
            "data-original-tokens": b.original_tokens,
        }
        path = f'<div class="path">{esc(b.path)}</div>' if b.path else ""
        why = ", ".join(esc(x) for x in (b.strategy, b.reason) if x)
        rows.append(
            f'<tr class="{esc(b.status)}"{_attrs(data)}><td>{esc(b.id)}{path}</td>'
            f"<td>{esc(b.layer)}</td><td>{esc(b.plugin)}</td>"
            f'<td><i class="swatch block {esc(b.status)}" style="background-color:'
            f'{colors.get(b.layer, "#888")}"></i>{esc(b.status)}</td>'
            f'<td class="n">{b.tokens:,}</td><td class="n">{b.original_tokens:,}</td>'
            f"<td>{why}</td></tr>"
        )
    return (
        '<section id="blocks"><h2>Blocks</h2><table><thead><tr>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _head(*names: str) -> str:
    """Table headings; a name starting with ``#`` is a number column (right-aligned)."""
    return "".join(
        f'<th class="n">{n[1:]}</th>' if n.startswith("#") else f"<th>{n}</th>" for n in names
    )


def _light(color: str) -> bool:
    """Whether dark text reads better than white on ``color`` (``#rrggbb``)."""
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.299 * r + 0.587 * g + 0.114 * b > 150


def _layer_colors(layers: Sequence[LayerReport], blocks: Sequence[BlockReport]) -> dict[str, str]:
    """One colour per conceptual layer, a shade of its physical layer's hue (by order)."""
    seen: dict[str, str] = {}
    for name, placement in [(lr.layer, lr.placement) for lr in layers] + [
        (b.layer, b.placement) for b in blocks
    ]:
        if name not in seen:
            physical = PHYSICAL.get(placement, "")
            shades = SHADES[physical]
            used = sum(1 for p in seen.values() if p in shades)
            seen[name] = shades[used % len(shades)]
    return seen

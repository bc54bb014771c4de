"""A session's statistics as one self-contained HTML page (``lamina ledger stats --html``, and
``lamina serve``'s ``/v1/sessions/{label}/stats?format=html``): the totals, tokens and the
cache-hit ratio per turn and cost per turn as inline SVG charts with compactions and cache
busts marked, and a table of every turn. No script, nothing fetched; every figure is the
statistics' own and also sits in a ``data-`` attribute, so a test reads the page back."""

from __future__ import annotations

import math
from collections.abc import Sequence

from lamina import html_escape as esc
from lamina import html_page
from lamina_ledger.stats import TurnReport, TurnStats

#: The token series, bottom to top, with their colours.
SERIES = (
    ("cached", "cached input", "#2e8b57"),
    ("written", "cache write", "#dd8a45"),
    ("fresh", "uncached input", "#2f5fa7"),
    ("output", "output", "#8a8a8a"),
)
COST = "#7b4fb0"
RATIO = "#1d2433"
BUST = "#c62828"
COMPACTION = "#a0561c"

#: The charts' drawing area (SVG user units; the chart scales to the page's width).
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 1100, 280, 72, 56, 26, 30

STYLE = f"""
.chart{{width:100%;height:auto;display:block;margin:4px 0 6px}}
.chart text{{font:11px "DejaVu Sans",system-ui,sans-serif;fill:#4a5468}}
.chart .axis{{stroke:#b9c0cc;stroke-width:1}}
.chart .grid{{stroke:#eceef2;stroke-width:1}}
.chart .ratio{{fill:none;stroke:{RATIO};stroke-width:2}}
.chart .compaction{{stroke:{COMPACTION};stroke-width:2;stroke-dasharray:6 4}}
.chart .bust{{fill:{BUST}}}
.legend{{margin:4px 0 0;font-size:12px;color:#4a5468}}
.key{{margin-right:16px;white-space:nowrap}}
.swatch{{display:inline-block;width:14px;height:14px;margin-right:5px;vertical-align:-2px;
border-radius:2px}}
tr.compaction td{{color:{COMPACTION};background:#fbf4ee}}
tr.bust td.note{{color:{BUST};font-weight:600}}
td.sha{{font-family:"DejaVu Sans Mono",monospace;font-size:11px}}
"""


def render_stats_html(report: TurnReport) -> str:
    """The page for one session's statistics."""
    t = report.totals
    turns = [x for x in report.turns if x.type == "normal"]
    attrs = {
        "data-session": t.session,
        "data-turns": t.turns,
        "data-compactions": t.compactions,
        "data-turns-with-usage": t.turns_with_usage,
        "data-input-tokens": t.input_tokens,
        "data-cached-input-tokens": t.cached_input_tokens,
        "data-cache-creation-tokens": t.cache_creation_tokens,
        "data-output-tokens": t.output_tokens,
        "data-cache-hit-ratio": _num(t.cache_hit_ratio),
        "data-cost": _num(t.cost),
        "data-priced-turns": t.priced_turns,
        "data-cache-busts": t.cache_busts,
    }
    body = [
        f'<main id="stats"{_attrs(attrs)}>',
        _header(report),
        '<section id="tokens"><h2>Tokens and cache hits per turn</h2>',
        _token_chart(report.turns, turns),
        _legend(
            [(label, color) for _, label, color in SERIES] + [("cache-hit ratio", RATIO)],
            marks=True,
        ),
        "</section>",
        '<section id="costs"><h2>Cost per turn</h2>',
        _cost_chart(report.turns, turns),
        _legend([("cost (US dollars, models.dev prices)", COST)]),
        "</section>",
        _table(report.turns),
        "</main>",
    ]
    title = f"Lamina: session {t.session}, {t.turns:,} turns"
    return html_page(title, body, style=STYLE)


def _num(value: float | None) -> str:
    """A number for a ``data-`` attribute: exact (``repr``), empty for none."""
    return "" if value is None else repr(value)


def _attrs(values: dict[str, object]) -> str:
    return "".join(f' {name}="{esc(value)}"' for name, value in values.items())


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _dollars(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.6f}"


def _header(report: TurnReport) -> str:
    t = report.totals
    compacted = "1 compaction" if t.compactions == 1 else f"{t.compactions:,} compactions"
    busts = "1 cache bust" if t.cache_busts == 1 else f"{t.cache_busts:,} cache busts"
    priced = f" over {t.priced_turns:,} priced turns" if t.cost is not None else ""
    return (
        f"<header><h1>Session {esc(t.session)}</h1>"
        f'<p class="meta">{t.turns:,} turns, {compacted}, {busts}; '
        f"{t.turns_with_usage:,} turns with usage</p>"
        '<p class="summary">cache-hit ratio '
        f'<strong id="hit-ratio">{_ratio(t.cache_hit_ratio)}</strong> · '
        f'<span id="input-tokens">{t.input_tokens:,}</span> input tokens '
        f'(<span id="cached-tokens">{t.cached_input_tokens:,}</span> cached, '
        f'<span id="written-tokens">{t.cache_creation_tokens:,}</span> written) · '
        f'<span id="output-tokens">{t.output_tokens:,}</span> output · cost '
        f'<strong id="total-cost">{_dollars(t.cost)}</strong>{priced}</p></header>'
    )


def _nice(value: float) -> float:
    """An axis top at or above ``value`` whose quarter is a round number (1, 1.5, 2, 2.5, 3,
    4, 5, 6 or 8 times a power of ten), so the four gridlines read plainly."""
    if value <= 0:
        return 1.0
    quarter = value / 4
    base = 10.0 ** math.floor(math.log10(quarter))
    steps = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)
    return 4 * next(m * base for m in steps if m * base >= quarter * (1 - 1e-12))


class _Plot:
    """Where each normal turn's bar goes: ``slot`` units per turn, bars ``bar`` units wide."""

    def __init__(self, turns: int, top: float) -> None:
        self.inner_w = WIDTH - LEFT - RIGHT
        self.inner_h = HEIGHT - TOP - BOTTOM
        self.slot = self.inner_w / max(1, turns)
        self.bar = max(1.0, round(self.slot * 0.7, 2))
        self.top = top

    def x(self, number: int) -> float:
        """The left edge of turn ``number``'s bar (turns count from 1)."""
        return round(LEFT + (number - 1) * self.slot + (self.slot - self.bar) / 2, 2)

    def y(self, value: float) -> float:
        return round(TOP + self.inner_h * (1 - value / self.top), 2)

    def h(self, value: float) -> float:
        return round(self.inner_h * value / self.top, 2)


def _svg(kind: str, label: str, inner: list[str]) -> str:
    return (
        f'<svg id="chart-{kind}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{esc(label)}" xmlns="http://www.w3.org/2000/svg">{"".join(inner)}</svg>'
    )


def _axes(plot: _Plot, fmt: str) -> list[str]:
    out = []
    for i in range(5):
        value = plot.top * i / 4
        y = plot.y(value)
        text = f"${value:,.6g}" if fmt == "dollars" else f"{value:,.6g}"
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}"/>'
            f'<text x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{text}</text>'
        )
    bottom = HEIGHT - BOTTOM
    out.append(f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}"/>')
    return out


def _turn_labels(plot: _Plot, turns: Sequence[TurnStats]) -> list[str]:
    every = max(1, len(turns) // 20)
    return [
        f'<text x="{plot.x(t.number) + plot.bar / 2}" y="{HEIGHT - BOTTOM + 16}" '
        f'text-anchor="middle">{t.number}</text>'
        for t in turns
        if t.number % every == 0 or t.number == 1
    ]


def _markers(plot: _Plot, report_turns: Sequence[TurnStats]) -> list[str]:
    """Compactions as dashed lines between turns, cache busts as red marks over the turn."""
    out = []
    for t in report_turns:
        if t.compaction is not None:
            c = t.compaction
            x = round(LEFT + t.number * plot.slot, 2)
            tip = (
                f"compaction after turn {t.number} ({c.trigger}): "
                f"{_count(c.tokens_before)} → {_count(c.tokens_after)} tokens"
            )
            out.append(
                f'<g class="compaction-mark" data-after="{t.number}"><title>{esc(tip)}</title>'
                f'<line class="compaction" x1="{x}" x2="{x}" y1="{TOP - 14}" '
                f'y2="{HEIGHT - BOTTOM}"/><text x="{x + 4}" y="{TOP - 4}" '
                f'style="fill:{COMPACTION}">compaction</text></g>'
            )
        elif t.cache_bust is not None:
            b = t.cache_bust
            mid = plot.x(t.number) + plot.bar / 2
            tip = f"turn {t.number}: cache bust, block {b.block!r} {b.change}"
            out.append(
                f'<g class="bust-mark" data-number="{t.number}" data-block="{esc(b.block)}">'
                f"<title>{esc(tip)}</title>"
                f'<path class="bust" d="M{mid - 7} {TOP - 16}h14l-7 12z"/></g>'
            )
    return out


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _token_chart(report_turns: Sequence[TurnStats], turns: Sequence[TurnStats]) -> str:
    tallest = max((_stack(t)[-1][1] for t in turns if t.usage is not None), default=0)
    plot = _Plot(len(turns), _nice(tallest))
    inner = _axes(plot, "tokens")
    points = []
    for t in turns:
        if t.usage is None:
            continue
        x, stack = plot.x(t.number), _stack(t)
        rects = []
        for (kind, label, color), (tokens, up_to) in zip(SERIES, stack, strict=True):
            tip = f"turn {t.number}: {tokens:,} {label} tokens"
            rects.append(
                f'<rect class="seg {kind}" x="{x}" y="{plot.y(up_to)}" width="{plot.bar}" '
                f'height="{plot.h(tokens)}" fill="{color}" shape-rendering="crispEdges" '
                f'data-tokens="{tokens}"><title>{esc(tip)}</title></rect>'
            )
        inner.append(
            f'<g class="turn" data-number="{t.number}" data-total="{stack[-1][1]}">'
            f"{''.join(rects)}</g>"
        )
        ratio = t.cache_hit_ratio
        if ratio is not None:
            points.append((x + plot.bar / 2, TOP + plot.inner_h * (1 - ratio), t.number, ratio))
    if points:
        line = " ".join(f"{round(px, 2)},{round(py, 2)}" for px, py, _, _ in points)
        inner.append(f'<polyline class="ratio" points="{line}"/>')
        inner += [
            f'<circle class="ratio-point" cx="{round(px, 2)}" cy="{round(py, 2)}" r="3.5" '
            f'fill="{RATIO}" data-number="{n}" data-ratio="{_num(r)}">'
            f"<title>turn {n}: cache-hit ratio {r:.3f}</title></circle>"
            for px, py, n, r in points
        ]
    for i in range(5):  # the ratio's axis, on the right
        y = round(TOP + plot.inner_h * (1 - i / 4), 2)
        inner.append(f'<text x="{WIDTH - RIGHT + 6}" y="{y + 4}">{25 * i}%</text>')
    inner += _turn_labels(plot, turns) + _markers(plot, report_turns)
    return _svg("tokens", "tokens and cache-hit ratio per turn", inner)


def _stack(t: TurnStats) -> list[tuple[int, int]]:
    """Each series' tokens and the running total up to it (bottom to top)."""
    u = t.usage
    if u is None:
        return [(0, 0)] * len(SERIES)
    fresh = max(0, u.input_tokens - u.cached_input_tokens - u.cache_creation_tokens)
    values = (u.cached_input_tokens, u.cache_creation_tokens, fresh, u.output_tokens)
    out, total = [], 0
    for v in values:
        total += v
        out.append((v, total))
    return out


def _cost_chart(report_turns: Sequence[TurnStats], turns: Sequence[TurnStats]) -> str:
    priced = [t for t in turns if t.cost is not None]
    plot = _Plot(len(turns), _nice(max((t.cost or 0.0 for t in priced), default=0.0)))
    inner = _axes(plot, "dollars")
    for t in priced:
        cost = t.cost or 0.0
        inner.append(
            f'<rect class="cost" x="{plot.x(t.number)}" y="{plot.y(cost)}" width="{plot.bar}" '
            f'height="{plot.h(cost)}" fill="{COST}" shape-rendering="crispEdges" '
            f'data-number="{t.number}" data-cost="{_num(cost)}">'
            f"<title>turn {t.number}: {_dollars(cost)}</title></rect>"
        )
    if not priced:
        inner.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
            "no turn has a price (models.dev lists none for its model)</text>"
        )
    inner += _turn_labels(plot, turns) + _markers(plot, report_turns)
    return _svg("cost", "cost per turn", inner)


def _legend(keys: Sequence[tuple[str, str]], *, marks: bool = False) -> str:
    items = "".join(
        f'<span class="key"><i class="swatch" style="background:{color}"></i>{esc(label)}</span>'
        for label, color in keys
    )
    if marks:
        items += (
            f'<span class="key"><b style="color:{BUST}">&#9660;</b> cache bust (hover: the '
            "first block that changed)</span>"
            f'<span class="key"><b style="color:{COMPACTION}">&#8942;</b> compaction</span>'
        )
    return f'<p class="legend">{items}</p>'


_HEAD = (
    "turn",
    "id",
    "model",
    "#input",
    "#cached",
    "#written",
    "#output",
    "#hit ratio",
    "#cost",
    "#prefix",
    "prefix sha256",
    "note",
)


def _table(turns: Sequence[TurnStats]) -> str:
    head = "".join(
        f'<th class="n">{n[1:]}</th>' if n.startswith("#") else f"<th>{n}</th>" for n in _HEAD
    )
    rows = [_row(t) for t in turns]
    return (
        '<section id="turns"><h2>Turns</h2><table><thead><tr>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def _row(t: TurnStats) -> str:
    u, b = t.usage, t.cache_bust
    data = {
        "data-number": t.number,
        "data-turn": t.turn_id,
        "data-type": t.type,
        "data-input-tokens": "" if u is None else u.input_tokens,
        "data-cached-input-tokens": "" if u is None else u.cached_input_tokens,
        "data-cache-creation-tokens": "" if u is None else u.cache_creation_tokens,
        "data-output-tokens": "" if u is None else u.output_tokens,
        "data-cache-hit-ratio": _num(t.cache_hit_ratio),
        "data-cost": _num(t.cost),
        "data-prefix-tokens": "" if t.prefix_tokens is None else t.prefix_tokens,
        "data-prefix-sha256": t.prefix_sha256 or "",
        "data-cache-bust": "" if b is None else b.block,
        "data-change": "" if b is None else b.change,
        "data-stop-reason": t.stop_reason or "",
        "data-error": t.error or "",
    }
    if t.compaction is not None:
        c = t.compaction
        note = (
            f"compaction ({c.trigger}): {_count(c.tokens_before)} → {_count(c.tokens_after)} tokens"
        )
        return (
            f'<tr class="compaction"{_attrs(data)}><td></td>'
            f'<td title="{esc(t.turn_id)}">{esc(t.turn_id[:12])}</td>'
            f'<td colspan="9"></td><td class="note">{esc(note)}</td></tr>'
        )
    notes = []
    if b is not None:
        notes.append(f"cache bust: block {b.block!r} {b.change}")
    if t.stop_reason and t.stop_reason != "end_turn":
        notes.append(f"stopped: {t.stop_reason}")
    if t.error:
        notes.append(f"error: {t.error}")
    cells = [
        "" if u is None else f"{u.input_tokens:,}",
        "" if u is None else f"{u.cached_input_tokens:,}",
        "" if u is None else f"{u.cache_creation_tokens:,}",
        "" if u is None else f"{u.output_tokens:,}",
        "" if t.cache_hit_ratio is None else _ratio(t.cache_hit_ratio),
        "" if t.cost is None else _dollars(t.cost),
        "" if t.prefix_tokens is None else f"{t.prefix_tokens:,}",
    ]
    numbers = "".join(f'<td class="n">{c}</td>' for c in cells)
    kind = ' class="bust"' if b is not None else ""
    return (
        f"<tr{kind}{_attrs(data)}><td>{t.number}</td>"
        f'<td title="{esc(t.turn_id)}">{esc(t.turn_id[:12])}</td>'
        f"<td>{esc(t.model or '')}</td>{numbers}"
        f'<td class="sha">{esc((t.prefix_sha256 or "")[:12])}</td>'
        f'<td class="note">{esc("; ".join(notes))}</td></tr>'
    )

"""A session's statistics as text for a terminal: the totals, then (``--per-turn``) one line
per turn with its usage, hit ratio, cost and prefix, compactions and cache busts spelled out."""

from __future__ import annotations

from lamina_ledger.stats import TurnReport, TurnStats


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _dollars(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.6f}"


def totals_text(report: TurnReport) -> str:
    s = report.totals
    cost = _dollars(s.cost)
    if s.cost is not None:
        cost += f" ({s.priced_turns:,} priced turns)"
    rows = [
        ("session", s.session),
        ("turns", f"{s.turns:,}"),
        ("compactions", f"{s.compactions:,}"),
        ("turns with usage", f"{s.turns_with_usage:,}"),
        ("input tokens", f"{s.input_tokens:,}"),
        ("cached input tokens", f"{s.cached_input_tokens:,}"),
        ("cache write tokens", f"{s.cache_creation_tokens:,}"),
        ("output tokens", f"{s.output_tokens:,}"),
        ("cache-hit ratio", _ratio(s.cache_hit_ratio)),
        ("cost", cost),
        ("cache busts", f"{s.cache_busts:,}"),
    ]
    width = max(len(k) for k, _ in rows)
    return "".join(f"{key:<{width}}  {value}\n" for key, value in rows)


_HEAD = ("turn", "input", "cached", "written", "output", "hit", "cost", "prefix", "sha256", "")


def _cells(t: TurnStats) -> tuple[str, ...]:
    u = t.usage
    if t.compaction is not None:
        c = t.compaction
        before = "?" if c.tokens_before is None else f"{c.tokens_before:,}"
        after = "?" if c.tokens_after is None else f"{c.tokens_after:,}"
        note = f"compaction ({c.trigger}): {before} -> {after} tokens"
        return ("-", "", "", "", "", "", "", "", "", note)
    notes = []
    if t.cache_bust is not None:
        notes.append(f"cache bust: block {t.cache_bust.block!r} {t.cache_bust.change}")
    if t.stop_reason and t.stop_reason != "end_turn":
        notes.append(f"stopped: {t.stop_reason}")
    if t.error:
        notes.append(f"error: {t.error}")
    return (
        str(t.number),
        "" if u is None else f"{u.input_tokens:,}",
        "" if u is None else f"{u.cached_input_tokens:,}",
        "" if u is None else f"{u.cache_creation_tokens:,}",
        "" if u is None else f"{u.output_tokens:,}",
        "" if t.cache_hit_ratio is None else _ratio(t.cache_hit_ratio),
        "" if t.cost is None else _dollars(t.cost),
        "" if t.prefix_tokens is None else f"{t.prefix_tokens:,}",
        (t.prefix_sha256 or "")[:12],
        "; ".join(notes),
    )


def stats_text(report: TurnReport, *, per_turn: bool = False) -> str:
    """The totals, and with ``per_turn`` a table of every turn (numbers right-aligned)."""
    out = totals_text(report)
    if not per_turn:
        return out
    rows = [_HEAD, *(_cells(t) for t in report.turns)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD) - 1)]
    lines = []
    for r in rows:
        cols = [r[0].rjust(widths[0])]
        cols += [c.rjust(w) for c, w in zip(r[1:-2], widths[1:-1], strict=True)]
        cols.append(r[-2].ljust(widths[-1]))
        lines.append(("  ".join(cols) + "  " + r[-1]).rstrip())
    return out + "\n" + "\n".join(lines) + "\n"

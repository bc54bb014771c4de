"""A session's statistics turn by turn: the provider's usage, the cache-hit ratio, the cost, the
stable prefix each request was assembled with and whether it broke the cache, why the turn
ended, and where compactions came; with the session's totals over the same turns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attrs import frozen

from lamina import Usage
from lamina_ledger.prefix import Bust
from lamina_ledger.records import Compaction, Stats, TurnType
from lamina_ledger.rows import chunks

if TYPE_CHECKING:
    from lamina_ledger.reader import LedgerReader

#: The columns read per turn (``_V4``'s exist from schema version 4 on).
_COLUMNS = (
    "id, type, model, provider, started_at, input_tokens, cached_input_tokens, "
    "cache_creation_tokens, output_tokens"
)
_V4 = "cost, stop_reason, error, prefix_sha256, prefix_tokens, prefix_change, prefix_block"


@frozen(kw_only=True)
class TurnStats:
    """One turn of a session's ancestry as the statistics show it.

    ``number`` counts the session's normal turns from 1; a compaction carries the number of
    the turn before it. ``cache_bust`` is set when the turn's stable prefix did not start with
    the previous turn's and no compaction came between: the first block that changed."""

    number: int
    turn_id: str
    type: TurnType
    model: str | None = None
    provider: str | None = None
    started_at: str = ""
    usage: Usage | None = None
    cost: float | None = None
    prefix_sha256: str | None = None
    prefix_tokens: int | None = None
    cache_bust: Bust | None = None
    stop_reason: str | None = None
    error: str | None = None
    compaction: Compaction | None = None

    @property
    def cache_hit_ratio(self) -> float | None:
        """Cached input over all input (``None`` without usage or input)."""
        u = self.usage
        return u.cached_input_tokens / u.input_tokens if u and u.input_tokens else None


@frozen(kw_only=True)
class TurnReport:
    """A session's totals and its turns, oldest first."""

    totals: Stats
    turns: tuple[TurnStats, ...]


def turn_report(reader: LedgerReader, session: str) -> TurnReport:
    """Every turn of ``session``'s ancestry with its statistics, in one snapshot."""
    with reader._failing(session), reader.db.read():
        head = reader._head(session)
        ids = [r[0] for r in reversed(reader._walk(session, head, "all"))] if head else []
        v4 = _V4 if reader.db.schema_version >= 4 else ", ".join(["NULL"] * 7)
        rows: dict[str, tuple[Any, ...]] = {}
        for chunk in chunks(ids, 500):
            marks = ", ".join("?" * len(chunk))
            for row in reader.db.rows(
                f"SELECT {_COLUMNS}, {v4} FROM turns WHERE id IN ({marks})", chunk
            ):
                rows[row[0]] = row
        turns, number = [], 0
        for tid in ids:
            row = rows[tid]
            compaction = None
            if row[1] == "compaction":
                compaction = reader._compaction(tid, session)
            else:
                number += 1
            turns.append(_turn(row, number, compaction))
    return TurnReport(totals=totals(session, turns), turns=tuple(turns))


def _turn(row: tuple[Any, ...], number: int, compaction: Compaction | None) -> TurnStats:
    usage = None
    if row[5] is not None:
        usage = Usage(
            input_tokens=int(row[5]),
            cached_input_tokens=int(row[6] or 0),
            cache_creation_tokens=int(row[7] or 0),
            output_tokens=int(row[8] or 0),
        )
    change, block = row[14], row[15]
    return TurnStats(
        number=number,
        turn_id=row[0],
        type=row[1],
        model=row[2],
        provider=row[3],
        started_at=row[4],
        usage=usage,
        cost=None if row[9] is None else float(row[9]),
        stop_reason=row[10],
        error=row[11],
        prefix_sha256=row[12],
        prefix_tokens=None if row[13] is None else int(row[13]),
        cache_bust=None if change is None else Bust(block=block or "", change=change),
        compaction=compaction,
    )


def totals(session: str, turns: list[TurnStats]) -> Stats:
    """The session's totals over ``turns``."""
    used = [t.usage for t in turns if t.usage is not None]
    priced = [t.cost for t in turns if t.cost is not None]
    return Stats(
        session=session,
        turns=sum(1 for t in turns if t.type == "normal"),
        compactions=sum(1 for t in turns if t.type == "compaction"),
        input_tokens=sum(u.input_tokens for u in used),
        cached_input_tokens=sum(u.cached_input_tokens for u in used),
        cache_creation_tokens=sum(u.cache_creation_tokens for u in used),
        output_tokens=sum(u.output_tokens for u in used),
        turns_with_usage=len(used),
        cost=sum(priced) if priced else None,
        priced_turns=len(priced),
        cache_busts=sum(1 for t in turns if t.cache_bust is not None),
    )


def totals_data(s: Stats) -> dict[str, Any]:
    """The totals as JSON-ready data."""
    return {
        "turns": s.turns,
        "compactions": s.compactions,
        "turns_with_usage": s.turns_with_usage,
        "input_tokens": s.input_tokens,
        "cached_input_tokens": s.cached_input_tokens,
        "cache_creation_tokens": s.cache_creation_tokens,
        "output_tokens": s.output_tokens,
        "cache_hit_ratio": s.cache_hit_ratio,
        "cost": s.cost,
        "priced_turns": s.priced_turns,
        "cache_busts": s.cache_busts,
    }


def turn_data(t: TurnStats) -> dict[str, Any]:
    """One turn as JSON-ready data."""
    u, c = t.usage, t.compaction
    return {
        "number": t.number,
        "turn_id": t.turn_id,
        "type": t.type,
        "model": t.model,
        "provider": t.provider,
        "started_at": t.started_at,
        "input_tokens": None if u is None else u.input_tokens,
        "cached_input_tokens": None if u is None else u.cached_input_tokens,
        "cache_creation_tokens": None if u is None else u.cache_creation_tokens,
        "output_tokens": None if u is None else u.output_tokens,
        "cache_hit_ratio": t.cache_hit_ratio,
        "cost": t.cost,
        "prefix_sha256": t.prefix_sha256,
        "prefix_tokens": t.prefix_tokens,
        "cache_bust": None
        if t.cache_bust is None
        else {"block": t.cache_bust.block, "change": t.cache_bust.change},
        "stop_reason": t.stop_reason,
        "error": t.error,
        "compaction": None
        if c is None
        else {
            "trigger": c.trigger,
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
            "summarizer": c.summarizer,
            "first_kept_turn_id": c.first_kept_turn_id,
        },
    }


def report_data(report: TurnReport, *, per_turn: bool = True) -> dict[str, Any]:
    """The report as JSON-ready data (``lamina ledger stats --json``; the turns with
    ``per_turn``)."""
    data: dict[str, Any] = {
        "session": report.totals.session,
        "totals": totals_data(report.totals),
    }
    if per_turn:
        data["turns"] = [turn_data(t) for t in report.turns]
    return data

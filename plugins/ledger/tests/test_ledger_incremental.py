"""Incremental history: a reader remembers each session's decoded turns and blocks between
requests and decodes only what was appended since; another writer's append and a compaction
are seen on the next request; whatever happens, the remembered history equals a fresh read."""

from __future__ import annotations

import hashlib
import math
import shutil
import tempfile
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lamina_ledger.ledger import Ledger
from lamina_ledger.session import LedgerSession

from lamina import Chunked, Message, ToolCallPart, ToolResultPart
from lamina.testing import make_assembler


def test_the_next_request_decodes_only_the_turn_appended_since(
    target: str,
    exchange: Callable[..., list[Message]],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(5):
            s.record_turn(a.request(f"q{i}"), exchange(i))
        first = s.assemble(a.request("now"))
        assert len(first.history) == 20
        before = s.ledger.decoded
        assert s.assemble(a.request("again")).history == first.history
        assert s.ledger.decoded == before  # nothing appended: nothing read or decoded
        s.record_turn(a.request("q5"), exchange(5))
        second = s.assemble(a.request("now"))
        assert s.ledger.decoded == before + 1
        assert second.history[:20] == first.history and len(second.history) == 24
    a.close()


def test_a_grown_sessions_context_shares_the_history_before_the_new_turn(
    target: str,
    exchange: Callable[..., list[Message]],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    """The messages of the turns before are the previous context's own (``Chunked``), as are
    the decoded turns the ledger keeps: a request copies the new turn, not the whole history
    (a fresh assembler gives the same)."""
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(5):
            s.record_turn(a.request(f"q{i}"), exchange(i))
        contexts = [s.assemble(a.request("now"))]
        turns = [s.ledger.history("s").turns]
        for i in range(5, 40):
            s.record_turn(a.request(f"q{i}"), exchange(i))
            contexts.append(s.assemble(a.request("now")))
            turns.append(s.ledger.history("s").turns)
        for before_turns, after_turns in pairwise(turns[1:]):  # (the turns the ledger keeps)
            assert isinstance(after_turns, Chunked) and after_turns.shares(before_turns)
        for before, after in pairwise(contexts):
            assert isinstance(after.history, Chunked) and isinstance(before.history, Chunked)
            assert after.history.shares(before.history)
            assert len(after.history) == len(before.history) + 4
        fresh = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
        with LedgerSession(fresh) as again:
            assert again.assemble(fresh.request("now")).history == contexts[-1].history
        fresh.close()
    a.close()


def test_another_writers_append_and_compaction_are_seen_on_the_next_request(
    target: str,
    exchange: Callable[..., list[Message]],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s, Ledger.open(target) as other:
        s.start("s")
        for i in range(4):
            s.record_turn(a.request(f"q{i}"), exchange(i))
        assert len(s.assemble(a.request("now")).history) == 16
        before = s.ledger.decoded
        third = s.ledger.head("s")
        other.append_turn("s", [Message.of("user", "from elsewhere")])
        ctx = s.assemble(a.request("now"))
        assert ctx.history[-1].text == "from elsewhere" and s.ledger.decoded == before + 1
        kept = s.ledger.history("s").turns[3].id
        other.record_compaction("s", "the gist so far", kept)
        ctx = s.assemble(a.request("now"))
        texts = [m.text for m in ctx.history]
        assert texts[0].endswith("the gist so far")
        assert texts[1:] == [m.text for m in exchange(3)] + ["from elsewhere"]
        assert s.ledger.decoded == before + 1, "the kept turns were decoded already"
        assert third is not None
    a.close()


def test_blocks_are_made_once_with_the_hash_stored_at_write_time(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        w.append_turn("s", [Message.of("user", "hello"), Message.of("assistant", "hi")])
        stored = [
            r[0] for r in w.db.rows("SELECT content_hash, content_json FROM messages ORDER BY seq")
        ]
        texts = [r[0] for r in w.db.rows("SELECT content_json FROM messages ORDER BY seq")]

        def make(turn: Any) -> list[Any]:
            from lamina_ledger.blocks import turn_blocks

            made.append(turn.id)
            return turn_blocks(turn, "ledger")

        made: list[str] = []
        args: dict[str, Any] = {"at_turn": None, "plugin": "ledger", "make": make}
        args["summary"] = ("", lambda h: None)
        one = w.history_blocks("s", **args)
        two = w.history_blocks("s", **args)
    assert stored == [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    assert [b.hash for b in one] == stored
    assert all(x is y for x, y in zip(one, two, strict=True)) and len(made) == 1


def test_a_pinned_turns_history_is_remembered(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        t0 = w.append_turn("s", [Message.of("user", "a")])
        w.append_turn("s", [Message.of("user", "b")])
        assert [m.text for t in w.history("s", at_turn=t0).turns for m in t.messages] == ["a"]
        seen = w.decoded
        w.append_turn("s", [Message.of("user", "c")])
        assert w.history("s", at_turn=t0).turns[0].messages[0].text == "a"
        assert w.decoded == seen


# -- property: remembered == fresh --------------------------------------------------------


def blocks(reader: Ledger) -> list[tuple[str, str, int | None]]:
    """The history's blocks as the provider makes them: id, hash and count."""
    from lamina_ledger.blocks import summary_block, summary_key, turn_blocks
    from lamina_ledger.settings import LedgerSettings

    made = reader.history_blocks(
        "s",
        at_turn=None,
        plugin="ledger",
        summary=(summary_key(LedgerSettings()), lambda h: summary_block(h, LedgerSettings(), "x")),
        make=lambda turn: turn_blocks(turn, "ledger"),
    )
    return [(b.id, b.hash, b.token_count) for b in made]


OPS = st.lists(
    st.tuples(
        st.sampled_from(["append", "call", "result", "compact", "read", "branch"]),
        st.integers(min_value=0, max_value=1),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_the_remembered_history_always_equals_a_fresh_read(ops: list[tuple[str, int]]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ledger-incr-"))
    db = str(folder / "l.db")
    try:
        writers = [Ledger.open(db), Ledger.open(db)]  # two connections, each remembering
        writers[0].create_session("s")
        calls: list[str] = []
        for n, (op, who) in enumerate(ops):
            w = writers[who]
            if op == "append":
                w.append_turn("s", [Message.of("user", f"u{n}"), Message.of("assistant", "ok")])
            elif op == "call":
                calls.append(f"c{n}")
                call = ToolCallPart(id=f"c{n}", name="t", arguments={})
                w.append_turn("s", [Message(role="assistant", content=(call,))])
            elif op == "result" and calls:
                result = ToolResultPart(call_id=calls.pop(0), content="r")
                w.append_turn("s", [Message(role="tool", content=(result,))])
            elif op == "compact":
                ids = [t.id for t in w.history("s").turns]
                keep = ids[len(ids) // 2] if ids else None
                w.record_compaction("s", f"summary {n}", keep)
            elif op == "branch":
                ids = [t.id for t in w.history("s").turns]
                if len(ids) > 1:
                    w.append_turn("s", [Message.of("user", f"b{n}")], parent_turn_id=ids[0])
                    calls.clear()  # the open calls may be on the branch left behind
            for reader in writers:
                with Ledger.open(db, readonly=True) as fresh:
                    assert reader.history("s") == fresh.history("s")
                    assert blocks(reader) == blocks(fresh)
        for w in writers:
            w.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("count", [3])
def test_the_remembered_history_equals_a_fresh_read_on_postgres(
    postgres_dsn: str, count: int, exchange: Callable[..., list[Message]]
) -> None:
    from lamina.testing.postgres import fresh_schema

    target = fresh_schema(postgres_dsn)
    with Ledger.open(target) as a, Ledger.open(target) as b:
        for i in range(count):
            a.append_turn("s", exchange(i))
            assert a.history("s") == b.history("s")
        b.record_compaction("s", "gist", a.history("s").turns[-1].id)
        a.append_turn("s", exchange(count))
        with Ledger.open(target, readonly=True) as fresh:
            assert a.history("s") == b.history("s") == fresh.history("s")


def test_a_turns_prefix_entries_are_made_and_compared_for_its_new_blocks_only(
    target: str,
    exchange: Callable[..., list[Message]],
    monkeypatch: pytest.MonkeyPatch,
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    """Recording a turn makes the prefix entries of the report's new chunks only (the rest
    are the previous report's, made once), and its prefix shares the previous turn's chunks
    of entries, so finding whether it extends that prefix compares the entries of the
    chunks that changed only: over a session, each about log2(n) times its blocks in all
    (chunks merge as the history grows: each block is in about log2(n) of them), not once
    per turn for every block before. The prefix is the one made afresh."""
    from lamina_ledger import prefix as prefixes
    from lamina_ledger.stats import turn_report

    made: list[int] = []
    grouped = prefixes._grouped
    monkeypatch.setattr(prefixes, "_grouped", lambda run: made.append(len(run)) or grouped(run))
    looked: list[int] = []
    same = prefixes._same_chunks

    def counted(old: Any, new: Any) -> int:
        found = same(old, new)
        looked.append(len(old) - found)
        return found

    monkeypatch.setattr(prefixes, "_same_chunks", counted)
    memo = prefixes.EntryMemo()
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(150):
            request = a.request(f"q{i}")
            ctx = s.assemble(request)
            kept = prefixes.prefix_from(ctx.report, ctx.tools, memo)
            assert kept == prefixes.prefix_from(ctx.report, ctx.tools)
            made.pop()  # (the fresh one's)
            s.record_turn(request, exchange(i))
        n = len(ctx.report.blocks)
        busts = [t.cache_bust for t in turn_report(s.ledger, "s").turns]
    a.close()
    assert n >= 590 and len(looked) == 149
    assert busts == [None] * 150  # (each turn's prefix extends the one before)
    assert sum(made) <= 2 * n * math.log2(n), f"{sum(made)} entries made for {n} blocks"
    assert sum(looked) <= 2 * n * math.log2(n), f"{sum(looked)} entries compared for {n}"


def test_what_a_request_needs_that_never_changes_is_made_once(
    target: str,
    exchange: Callable[..., list[Message]],
    monkeypatch: pytest.MonkeyPatch,
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    """The database path and the block makers, per settings and config; the summary's
    tokens, per compaction: a request neither resolves the path nor makes and hashes the
    summary's text again."""
    import lamina_ledger.sizing as sizing
    from lamina_ledger.settings import LedgerSettings

    resolved: list[str] = []
    summaries: list[str] = []
    real_target, real_text = LedgerSettings.target, sizing.summary_text

    def spy_target(self: LedgerSettings, config: Any) -> str | None:
        resolved.append(str(self.database))
        return real_target(self, config)

    def spy_text(summary: str, settings: Any) -> str:
        summaries.append(summary)
        return real_text(summary, settings)

    monkeypatch.setattr(LedgerSettings, "target", spy_target)
    monkeypatch.setattr(sizing, "summary_text", spy_text)
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s, Ledger.open(target) as other:
        s.start("s")
        for i in range(4):
            s.record_turn(a.request(f"q{i}"), exchange(i))
        other.record_compaction("s", "the gist so far", s.ledger.history("s").turns[2].id)
        contexts = [s.assemble(a.request("now"))]
        first = len(resolved)  # (the session's own, and the provider's)
        contexts += [s.assemble(a.request(f"now {i}")) for i in range(4)]
        assert all(c.history[0].text.endswith("the gist so far") for c in contexts)
        other.record_compaction("s", "a newer gist", s.ledger.history("s").turns[-1].id)
        assert s.assemble(a.request("later")).history[0].text.endswith("a newer gist")
        s.assemble(a.request("later still"))
    a.close()
    assert len(resolved) == first <= 2
    assert summaries == ["the gist so far", "a newer gist"]


def test_a_turn_is_sized_when_it_is_recorded_not_at_the_next_request(
    target: str,
    exchange: Callable[..., list[Message]],
    monkeypatch: pytest.MonkeyPatch,
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    """``record_turn`` has the new turn's exact counts at hand: it sizes the turn there
    (framing and tool ids with them), so the next request sizes nothing; and the size is the
    one a session that never saw the turn written makes from the stored turn."""
    import lamina_ledger.sizing as sizing

    sized: list[str] = []
    real = sizing.turn_size

    def spy(turn: Any, tokenizer: Any, overhead: int) -> int:
        sized.append(turn.id)
        return real(turn, tokenizer, overhead)

    monkeypatch.setattr(sizing, "turn_size", spy)
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(4):
            s.record_turn(a.request(f"q{i}"), exchange(i))
            s.assemble(a.request(f"now {i}"))
        request = a.request("then")
        written = s._history_tokens(request)
    assert sized == []
    with LedgerSession(a) as fresh:
        assert fresh._history_tokens(request) == written
    assert len(sized) == 4
    a.close()


def test_a_turn_written_through_the_session_has_its_blocks_made_as_it_is_written(
    target: str,
    exchange: Callable[..., list[Message]],
    monkeypatch: pytest.MonkeyPatch,
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    """The turn goes on the remembered history at write time with its blocks, made by the
    maker that made the history's blocks before: the next request makes none, and its
    context is the one a session that never saw the writes assembles."""
    import lamina_ledger.blocks as blocks

    made: list[str] = []
    doing = ["reading"]
    real = blocks.turn_blocks

    def spy(turn: Any, name: str) -> Any:
        made.append(doing[0])
        return real(turn, name)

    monkeypatch.setattr(blocks, "turn_blocks", spy)
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        s.record_turn(a.request("q0"), exchange(0))
        s.assemble(a.request("now"))
        made.clear()
        for i in range(1, 4):
            doing[0] = "writing"
            s.record_turn(a.request(f"q{i}"), exchange(i))
            doing[0] = "reading"
            context = s.assemble(a.request(f"now {i}"))
    assert made == ["writing"] * 3
    fresh = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(fresh) as other:
        assert other.assemble(fresh.request("now 3")).history == context.history
    a.close()
    fresh.close()

"""The session layer through the kernel: inert without config, summary first with its marker,
kept turns grouped by turn with exact counts, proactive and reactive compaction."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import pytest
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger
from lamina_ledger.session import LedgerSession

from lamina import Message, ToolCallPart, ToolResultPart
from lamina.testing import make_assembler

Grow = Callable[[LedgerSession, int, int], list[Any]]


def config(database: str | None, budget: int = 100_000, **ledger: Any) -> dict[str, Any]:
    section = {"database": database, **ledger} if database else None
    cfg: dict[str, Any] = {
        "model": "gpt-4o",
        "session": "s",
        "budget": {"max_tokens": budget, "reserve_response": 0, "reserve_tools": 0},
    }
    if section:
        cfg["plugins"] = {"ledger": section}
    return cfg


def test_inert_without_a_config_section() -> None:
    a = make_assembler(config(None), plugins=[("ledger", plugin)])
    ctx = a.assemble(a.request("hello"))
    assert ctx.history == () and ctx.report.warnings == ()


def test_history_is_summary_then_kept_turns(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        t0 = w.append_turn("s", exchange(0))
        t1 = w.append_turn(
            "s",
            [
                Message.of("user", "second", context_json={"event": {"hookCount": 2}}),
                Message.of("assistant", "fine"),
            ],
            total_tokens=10,
            counted_by="o200k_base",  # gpt-4o's tokenizer: the counts are trusted
        )
        w.record_compaction("s", "We were fixing src/app.py", t1)
        t2 = w.append_turn("s", [Message.of("user", "third")])
    a = make_assembler(config(db), plugins=[("ledger", plugin)])
    ctx = a.assemble(a.request("now"))
    texts = [m.text for m in ctx.history]
    assert texts == [
        "[Previous conversation summary]\nWe were fixing src/app.py",
        "second",
        "fine",
        "third",
    ]
    assert [m.role for m in ctx.history] == ["user", "user", "assistant", "user"]
    assert ctx.history[1].context_json == {"event": {"hookCount": 2}}
    assert t0 not in str(ctx.report.blocks)
    blocks = {b.id: b for b in ctx.report.blocks}
    # total_tokens 10 split by size: "second" (6 chars) and "fine" (4 chars)
    assert blocks[f"ledger:{t1}:0"].tokens == 6 and blocks[f"ledger:{t1}:1"].tokens == 4
    assert f"ledger:{t2}:0" in blocks


def test_summary_role_and_marker_are_configurable(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        w.append_turn("s", [Message.of("user", "a")])
        w.record_compaction("s", "gist", None)
    a = make_assembler(
        config(db, summary_role="system", summary_marker="[Summary]"), plugins=[("ledger", plugin)]
    )
    ctx = a.assemble(a.request("now"))
    assert [(m.role, m.text) for m in ctx.history] == [("system", "[Summary]\ngist")]


def test_turn_blocks_are_grouped_so_tool_pairs_stay_together(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        for i in range(6):
            w.append_turn("s", exchange(i, "alpha beta gamma ", size=60))
    a = make_assembler(
        {**config(db, budget=900), "fit": {"strategy": "rollingWindow", "minimum_recent": 1}},
        plugins=[("ledger", plugin)],
    )
    ctx = a.assemble(a.request("now"))
    calls = {p.id for m in ctx.history for p in m.content if isinstance(p, ToolCallPart)}
    results = {p.call_id for m in ctx.history for p in m.content if isinstance(p, ToolResultPart)}
    assert calls == results and 0 < len(calls) < 6


def test_missing_session_fails_the_assembly_unless_empty_is_asked(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        w.append_turn("other", [Message.of("user", "a")])
    a = make_assembler(config(db), plugins=[("ledger", plugin)])
    with pytest.raises(LedgerError, match="session 's': no such session"):
        a.assemble(a.request("now"))
    b = make_assembler(config(db, missing_session="empty"), plugins=[("ledger", plugin)])
    assert b.assemble(b.request("now")).history == ()
    c = make_assembler(
        config(str(tmp_path / "absent.db"), missing_session="empty"), plugins=[("ledger", plugin)]
    )
    assert c.assemble(c.request("now")).history == ()
    assert not (tmp_path / "absent.db").exists()


def test_parent_turn_id_assembles_that_branch(tmp_path: Path) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        a0 = w.append_turn("s", [Message.of("user", "a")])
        w.append_turn("s", [Message.of("user", "b")])
    a = make_assembler(config(db), plugins=[("ledger", plugin)])
    ctx = a.assemble(a.request("now", parent_turn_id=a0))
    assert [m.text for m in ctx.history] == ["a"]


# -- compaction ------------------------------------------------------------------------


@pytest.fixture
def grow(exchange: Callable[..., list[Message]]) -> Grow:
    """``grow(session, turns, size)``: run ``turns`` turns through the host API; return each
    request's context."""

    def run(session: LedgerSession, turns: int, size: int) -> list[Any]:
        a = session.assembler
        out = []
        for i in range(turns):
            req = a.request(f"question {i}")
            ctx = session.assemble(req)
            out.append(ctx)
            session.record_turn(req, exchange(i, "lorem ipsum ", size=size))
        return out

    return run


def test_proactive_compaction_keeps_every_request_in_budget(tmp_path: Path, grow: Grow) -> None:
    db = str(tmp_path / "l.db")
    a = make_assembler(config(db, budget=4000), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        contexts = grow(s, 40, 40)
        assert s.compactions, "the history outgrew the budget, so it was compacted"
        for ctx in contexts:
            assert ctx.token_budget.used.total <= 4000
            assert all(b.status == "kept" for b in ctx.report.blocks if b.id.startswith("ledger:"))
        first = s.compactions[0]
        assert first.trigger == "context_limit" and first.tokens_after <= 0.6 * 4000
        stats = s.ledger.stats("s")
        assert stats.turns == 40 and stats.compactions == len(s.compactions)
        # compaction appended rows only: every turn ever written is still there
        assert int(s.ledger.db.one("SELECT count(*) FROM messages")[0]) == 40 * 4
        with s.ledger.db.read():
            row = s.ledger.db.one("SELECT trigger, summarizer FROM compactions LIMIT 1")
        assert row == ("context_limit", "ledger-extractive")


def test_between_compactions_each_request_extends_the_previous(tmp_path: Path, grow: Grow) -> None:
    db = str(tmp_path / "l.db")
    a = make_assembler(config(db, budget=4000), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        contexts = grow(s, 30, 60)
    resets = 0
    for prev, cur in pairwise(contexts):
        if cur.history[: len(prev.history)] == prev.history:
            assert len(cur.history) == len(prev.history) + 4
        else:
            resets += 1
            assert cur.history[0].text.startswith("[Previous conversation summary]")
    assert resets == len(s.compactions) >= 1


def test_minimum_turns_are_always_kept(tmp_path: Path, grow: Grow) -> None:
    db = str(tmp_path / "l.db")
    a = make_assembler(config(db, budget=3000, minimum_turns=3), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        grow(s, 6, 200)
        req = a.request("next")
        result = s.compact(req, share=0.05)
        assert result is not None and result.kept_turns == 3 and result.trigger == "manual"
        assert s.compact(req, share=0.05) is None  # nothing older than the newest 3 is left


def test_overflow_recovery_compacts_harder_and_retries_once(tmp_path: Path, grow: Grow) -> None:
    db = str(tmp_path / "l.db")
    a = make_assembler(config(db, budget=20_000, minimum_turns=1), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("s")
        grow(s, 12, 600)
        calls: list[int] = []

        class Overflow(Exception):
            pass

        def send(ctx: Any) -> str:
            calls.append(ctx.token_budget.used.total)
            if len(calls) == 1:
                raise Overflow("prompt is too long")
            return "reply"

        _ctx, reply = s.run(a.request("go"), send, is_overflow=lambda e: isinstance(e, Overflow))
        assert reply == "reply" and len(calls) == 2
        assert calls[1] <= 0.4 * 20_000 < calls[0]
        assert [c.trigger for c in s.compactions] == ["overflow_recovery"]

        def always(ctx: Any) -> str:
            raise Overflow("still too long")

        with pytest.raises(Overflow):
            s.run(a.request("go"), always, is_overflow=lambda e: isinstance(e, Overflow))

        def other(ctx: Any) -> str:
            raise ValueError("unrelated")

        before = len(s.compactions)
        with pytest.raises(ValueError):
            s.run(a.request("go"), other, is_overflow=lambda e: isinstance(e, Overflow))
        assert len(s.compactions) == before


def test_compaction_uses_the_configured_summarizer(tmp_path: Path, grow: Grow) -> None:
    from lamina import Summarizer, hookimpl

    class Mine:
        @hookimpl
        def lamina_summarizers(self) -> list[Summarizer]:
            return [
                Summarizer(name="fixed", summarize=lambda blocks, n, tok: f"{len(blocks)} blocks")
            ]

    db = str(tmp_path / "l.db")
    a = make_assembler(
        config(db, budget=3000, summarizer="fixed"), plugins=[("ledger", plugin), ("mine", Mine())]
    )
    with LedgerSession(a) as s:
        s.start("s")
        grow(s, 5, 100)
        s.compact(a.request("x"), share=0.3)
        h = s.ledger.history("s")
    assert h.compaction is not None and h.compaction.summary.endswith("blocks")
    assert h.compaction.summarizer == "fixed"


def test_unknown_summarizer_is_a_config_error(tmp_path: Path) -> None:
    from lamina import ConfigError

    a = make_assembler(
        config(str(tmp_path / "l.db"), summarizer="nope"), plugins=[("ledger", plugin)]
    )
    with LedgerSession(a) as s, pytest.raises(ConfigError, match="plugins.ledger.summarizer"):
        s.summarizer()


def test_settings_defaults_and_validation(tmp_path: Path) -> None:
    from lamina_ledger.settings import LedgerSettings

    from lamina import SerdeError

    s = LedgerSettings()
    assert (s.compact_target, s.recovery_target, s.minimum_turns) == (0.5, 0.4, 3)
    assert s.summary_marker == "[Previous conversation summary]" and s.summary_role == "user"
    with pytest.raises(SerdeError, match=r"plugins\.ledger"):
        make_assembler(
            config(str(tmp_path / "l.db"), compact_target=0.3), plugins=[("ledger", plugin)]
        )
    with pytest.raises(SerdeError, match="unknown keys"):
        make_assembler(config(str(tmp_path / "l.db"), colour="red"), plugins=[("ledger", plugin)])


def test_run_asks_the_provider_adapter_whether_an_error_is_an_overflow(
    tmp_path: Path, grow: Grow
) -> None:
    from lamina import Adapter, Usage, hookimpl

    class Fake:
        @hookimpl
        def lamina_adapters(self) -> list[Adapter]:
            return [
                Adapter(
                    name="fake",
                    build_request=lambda ctx, opts: {},
                    parse_usage=lambda resp: Usage(),
                    is_context_overflow=lambda err: "prompt is too long" in str(err),
                )
            ]

    db = str(tmp_path / "l.db")
    a = make_assembler(
        config(db, budget=20_000, minimum_turns=1),
        plugins=[("ledger", plugin), ("fake", Fake())],
    )
    with LedgerSession(a) as s:
        s.start("s")
        grow(s, 12, 600)
        sent: list[int] = []

        def send(ctx: Any) -> str:
            sent.append(ctx.token_budget.used.total)
            if len(sent) == 1:
                raise RuntimeError("400: prompt is too long")
            return "ok"

        _ctx, reply = s.run(a.request("go", provider="fake"), send)
    assert reply == "ok" and len(sent) == 2
    assert [c.trigger for c in s.compactions] == ["overflow_recovery"]


@pytest.mark.parametrize(
    ("worker_history", "reads"), [(None, False), ("none", False), ("session", True)]
)
def test_a_worker_reads_no_history_unless_configured(
    tmp_path: Path,
    exchange: Callable[..., list[Message]],
    worker_history: str | None,
    reads: bool,
) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as w:
        w.append_turn("s", exchange(0))
    extra = {} if worker_history is None else {"worker_history": worker_history}
    a = make_assembler(config(db, **extra), plugins=[("ledger", plugin)])
    worker = a.assemble(a.request("start", role="worker", task="Summarize the logs."))
    manager = a.assemble(a.request("hi"))  # a manager reads the session as ever
    assert len(manager.history) == len(exchange(0))
    assert worker.history == (manager.history if reads else ())

"""The ledger's history provider answers ``LedgerSession.assemble`` from the history the session
has just read on its own thread (``lamina_ledger.vouch``: no hop to the kernel's provider
pool), and still reads on the pool, within its time limit, anywhere else: a plain
``Assembler.assemble``, another thread, the ledger busy on another thread. What another
writer appended is seen on the next request. And a session's per-label memories are bounded."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
import lamina_ledger.session as session_module
import pytest
from lamina_ledger.blocks import summary_block, summary_key, turn_blocks
from lamina_ledger.ledger import Ledger
from lamina_ledger.session import LedgerSession
from lamina_ledger.settings import LedgerSettings
from lamina_ledger.vouch import remembered, vouched

from lamina import Message
from lamina.testing import make_assembler


def statements(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL ``ledger`` runs from now on (its database's ``execute`` spied on)."""
    seen: list[str] = []
    execute = ledger.db.execute

    def spy(sql: str, *args: Any) -> Any:
        seen.append(sql)
        return execute(sql, *args)

    monkeypatch.setattr(ledger.db, "execute", spy)
    return seen


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The threads the history provider's ``provide`` (a read on the pool) ran on."""
    seen: list[threading.Thread] = []
    provide = plugin.provide

    def spy(ctx: Any) -> Any:
        seen.append(threading.current_thread())
        return provide(ctx)

    monkeypatch.setattr(plugin, "provide", spy)  # before an assembler registers it
    return seen


def test_a_ledger_session_is_answered_from_memory_and_sees_another_writer(
    target: str,
    exchange: Callable[..., list[Message]],
    reads: list[threading.Thread],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s, Ledger.open(target) as other:
        s.start("s")
        for i in range(3):
            req = a.request(f"q{i}")
            s.assemble(req)
            s.record_turn(req, exchange(i))
        assert len(s.assemble(a.request("now")).history) == 12
        assert reads == []  # never read on the pool
        other.append_turn(
            "s", [Message.of("user", "from elsewhere"), Message.of("assistant", "ok")]
        )
        ctx = s.assemble(a.request("again"))
        assert [m.text for m in ctx.history[-2:]] == ["from elsewhere", "ok"]
        assert reads == []
        plain = a.assemble(a.request("plain"))  # no session around it: the provider reads
        assert plain.history == ctx.history
        assert len(reads) == 1 and reads[0] is not threading.current_thread()
    a.close()


def _makers(settings: LedgerSettings) -> dict[str, Any]:
    return {
        "plugin": "ledger",
        "summary": (summary_key(settings), lambda h: summary_block(h, settings, "ledger")),
        "make": lambda turn: turn_blocks(turn, "ledger"),
    }


def test_only_the_vouching_thread_and_an_idle_ledger_answer_from_memory(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    db = str(tmp_path / "l.db")
    settings = LedgerSettings(database=db)
    with Ledger.open(db) as ledger:
        ledger.create_session("s")
        ledger.append_turn("s", exchange(0))
        assert remembered(db, "s", None, **_makers(settings)) is None  # nothing vouched
        with vouched(db, ledger, "s", None):
            here = remembered(db, "s", None, **_makers(settings))
            assert here is not None and len(here) == 4
            assert remembered(db, "t", None, **_makers(settings)) is None  # another session
            assert remembered("other.db", "s", None, **_makers(settings)) is None
            elsewhere: list[Any] = []
            thread = threading.Thread(
                target=lambda: elsewhere.append(remembered(db, "s", None, **_makers(settings)))
            )
            thread.start()
            thread.join()
            assert elsewhere == [None]  # another thread reads for itself
            held, release = threading.Event(), threading.Event()

            def hold() -> None:
                with ledger.db.lock:  # another thread busy with the ledger (a slow read)
                    held.set()
                    release.wait(5)

            busy = threading.Thread(target=hold)
            busy.start()
            held.wait(5)
            try:
                assert remembered(db, "s", None, **_makers(settings)) is None  # never waits
            finally:
                release.set()
                busy.join()
        assert remembered(db, "s", None, **_makers(settings)) is None  # only while vouched


def test_a_missing_session_is_still_the_providers_to_report(
    tmp_path: Path, reads: list[threading.Thread], ledger_config: Callable[..., dict[str, Any]]
) -> None:
    db = str(tmp_path / "l.db")
    cfg = ledger_config(db)
    cfg["plugins"]["ledger"]["missing_session"] = "empty"
    a = make_assembler(cfg, plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        s.start("other")
        assert s.assemble(a.request("q", session_label="absent")).history == ()
        assert len(reads) == 1  # not vouched for: the provider read, and found none
    a.close()


def test_a_sessions_memories_keep_only_the_most_recent_labels(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    exchange: Callable[..., list[Message]],
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    monkeypatch.setattr(session_module, "SESSIONS", 4)
    a = make_assembler(ledger_config(str(tmp_path / "l.db")), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s:
        labels = [f"s{n}" for n in range(12)]
        for label in [*labels, *labels]:
            s.start(label)
            req = a.request(f"q {label}", session_label=label)
            s.assemble(req)
            s.record_turn(req, exchange(0))
        sizes = {
            "seen": len(s._seen),
            "assembled": len(s._assembled),
            "prefixes": len(s.prefixes._by_session),
            "totals": len(s._sizes._last),
        }
        assert max(sizes.values()) <= 4, sizes
        assert "s11" in s._assembled and "s0" not in s._assembled  # the least recent go
        for label in ("s0", "s11"):  # forgotten or not, a label assembles its whole history
            ctx = s.assemble(a.request("again", session_label=label))
            assert len(ctx.history) == 8
    a.close()


def _reads(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the turns ``ledger`` reads from its rows."""
    counted: list[int] = []
    turns = ledger._turns

    def spy(ids: Any, *args: Any) -> Any:
        counted.append(len(ids))
        return turns(ids, *args)

    monkeypatch.setattr(ledger, "_turns", spy)
    return counted


def test_a_turn_this_ledger_appended_is_remembered_as_read(
    target: str,
    exchange: Callable[..., list[Message]],
    monkeypatch: pytest.MonkeyPatch,
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    a = make_assembler(ledger_config(target), plugins=[("ledger", plugin)])
    with LedgerSession(a) as s, Ledger.open(target) as other:
        s.start("s")
        s.record_turn(a.request("q0"), exchange(0))
        s.assemble(a.request("warm"))
        counted = _reads(s.ledger, monkeypatch)
        for i in range(1, 4):
            req = a.request(f"q{i}")
            s.record_turn(req, exchange(i))
            ctx = s.assemble(a.request("next"))
            assert counted == [] and len(ctx.history) == 4 * (i + 1)  # nothing read
        other.append_turn("s", [Message.of("user", "elsewhere"), Message.of("assistant", "ok")])
        s.record_turn(a.request("q4"), exchange(4))  # on top of another writer's turn
        ctx = s.assemble(a.request("next"))
        assert [m.text for m in ctx.history[16:18]] == ["elsewhere", "ok"]
        assert len(ctx.history) == 22 and counted  # both read, as anything not known
        fresh = Ledger.open(target)
        assert s.ledger.history("s").turns == fresh.history("s").turns
        fresh.close()
    a.close()


def test_a_turn_appended_in_a_batch_is_remembered_only_once_committed(
    tmp_path: Path, exchange: Callable[..., list[Message]]
) -> None:
    db = str(tmp_path / "l.db")
    with Ledger.open(db) as ledger:
        ledger.append_turn("s", exchange(0))
        ledger.history("s")
        with pytest.raises(RuntimeError), ledger.batch("s"):
            ledger.append_turn("s", exchange(1))
            raise RuntimeError("rolled back")
        assert len(ledger.history("s").turns) == 1
        with ledger.batch("s"):
            ledger.append_turn("s", exchange(2))
        assert [t.messages[0].text for t in ledger.history("s").turns] == [
            exchange(0)[0].text,
            exchange(2)[0].text,
        ]


def test_a_vouched_history_is_read_again_only_after_a_write(
    tmp_path: Path, exchange: Callable[..., list[Message]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lamina_ledger.vouch import history_of

    db = str(tmp_path / "l.db")
    with Ledger.open(db) as ledger, Ledger.open(db) as other:
        ledger.append_turn("s", exchange(0))
        queries = statements(ledger, monkeypatch)
        with vouched(db, ledger, "s", None):
            queries.clear()
            first = history_of(db, ledger, "s", None)
            with vouched(db, ledger, "s", None):  # an inner scope for the same history
                assert history_of(db, ledger, "s", None) is first
            assert queries == []  # nothing read again
            other.append_turn("s", exchange(1))  # another connection: not seen in here
            assert history_of(db, ledger, "s", None) is first
            ledger.append_turn("s", exchange(2))  # a write through this ledger: read again
            assert len(history_of(db, ledger, "s", None).turns) == 3


def test_an_event_is_counted_before_the_kernel_only_when_its_size_matters(
    tmp_path: Path,
    exchange: Callable[..., list[Message]],
    monkeypatch: pytest.MonkeyPatch,
    ledger_config: Callable[..., dict[str, Any]],
) -> None:
    """Far under the limit, a bound on the event's tokens says no compaction is due, and the
    kernel counts the event; near it, the session counts it exactly first, as before."""
    cfg = ledger_config(str(tmp_path / "l.db"))
    a = make_assembler(cfg, plugins=[("ledger", plugin)])
    order: list[str] = []
    count, run = LedgerSession._event_tokens, a.run
    monkeypatch.setattr(
        LedgerSession, "_event_tokens", lambda self, r: order.append("count") or count(self, r)
    )
    monkeypatch.setattr(a, "run", lambda *args, **kw: order.append("kernel") or run(*args, **kw))
    with LedgerSession(a) as s:
        s.start("s")
        for i in range(3):
            req = a.request(f"q{i}")
            s.assemble(req)
            s.record_turn(req, exchange(i))
        order.clear()
        s.assemble(a.request("short"))
        assert order == ["kernel", "count"]  # counted after, from the kernel's memo
        big = "word " * 99_000  # its bound alone is over the limit: counted exactly first
        order.clear()
        s.assemble(a.request(big, max_tokens=200_000))
        s.assemble(a.request(big, max_tokens=200_000))
        assert order[-3:] == ["count", "kernel", "count"]
    a.close()


def test_an_unchanged_history_is_checked_with_one_statement(
    target: str, exchange: Callable[..., list[Message]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(target) as ledger, Ledger.open(target) as other:
        ledger.append_turn("s", exchange(0))
        first = ledger.history("s")
        seen = statements(ledger, monkeypatch)
        assert ledger.history("s") is first
        assert len(seen) == 1  # the version and head: no transaction around it
        other.append_turn("s", exchange(1))
        seen.clear()
        assert len(ledger.history("s").turns) == 2  # moved: read in a snapshot
        assert any(s.startswith("BEGIN") for s in seen)

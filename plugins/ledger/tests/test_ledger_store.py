"""The ledger's writer and reader on SQLite and PostgreSQL: round trips, ancestry, the latest
compaction, tool pairing, snapshots, and the errors for bad input (nothing written)."""

from __future__ import annotations

import pytest
from lamina_ledger.errors import LedgerError
from lamina_ledger.ledger import Ledger

from lamina import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart, Usage


def count(ledger: Ledger, table: str) -> int:
    row = ledger.db.one(f"SELECT count(*) FROM {table}")
    assert row is not None
    return int(row[0])


def test_round_trip_keeps_parts_usage_and_context(target: str) -> None:
    msgs = [
        Message.of("user", "Fix tests/test_x.py", context_json={"event": {"platform": "cli"}}),
        Message(
            role="assistant",
            content=(
                TextPart(text="Reading"),
                ToolCallPart(id="c1", name="read", arguments={"p": 1}),
            ),
        ),
        Message(
            role="tool", content=(ToolResultPart(call_id="c1", content="boom", is_error=True),)
        ),
    ]
    usage = Usage(
        input_tokens=1000, cached_input_tokens=800, cache_creation_tokens=100, output_tokens=42
    )
    with Ledger.open(target) as w:
        tid = w.append_turn(
            "s", msgs, usage=usage, model="gpt-4o", provider="openai", total_tokens=77
        )
    with Ledger.open(target, readonly=True) as r:
        turn = r.turn(tid)
    assert turn.messages == tuple(msgs)
    assert turn.usage == usage
    assert (turn.model, turn.provider, turn.total_tokens, turn.type) == (
        "gpt-4o",
        "openai",
        77,
        "normal",
    )


def test_history_uses_latest_compaction_and_kept_turns(target: str) -> None:
    with Ledger.open(target) as w:
        t = [w.append_turn("s", [Message.of("user", f"u{i}")]) for i in range(3)]
        c1 = w.record_compaction("s", "first summary", t[1], trigger="context_limit")
        t.append(w.append_turn("s", [Message.of("user", "u3")]))
        t.append(w.append_turn("s", [Message.of("user", "u4")]))
        c2 = w.record_compaction("s", "second summary", t[3], trigger="overflow_recovery")
        t.append(w.append_turn("s", [Message.of("user", "u5")]))
        h = w.history("s")
        assert w.ancestry("s") == [t[0], t[1], t[2], c1, t[3], t[4], c2, t[5]]
    assert h.compaction is not None and h.compaction.turn_id == c2
    assert h.compaction.summary == "second summary"
    assert h.compaction.trigger == "overflow_recovery"
    assert [x.messages[0].text for x in h.turns] == ["u3", "u4", "u5"]


def test_no_compaction_gives_full_history_and_forks_share_ancestors(target: str) -> None:
    with Ledger.open(target) as w:
        a = w.append_turn("main", [Message.of("user", "a")])
        b = w.append_turn("main", [Message.of("user", "b")])
        w.fork("main", "side", at_turn=a)
        c = w.append_turn("side", [Message.of("user", "c")])
        assert [x.id for x in w.history("main").turns] == [a, b]
        assert [x.id for x in w.history("side").turns] == [a, c]
        assert w.ancestry("side") == [a, c]
        assert w.sessions() == ["main", "side"]


def test_compaction_cut_inside_a_tool_pair_keeps_the_call(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "old")])
        call = w.append_turn(
            "s", [Message(role="assistant", content=(ToolCallPart(id="k", name="ls"),))]
        )
        result = w.append_turn(
            "s", [Message(role="tool", content=(ToolResultPart(call_id="k", content="a.py"),))]
        )
        w.record_compaction("s", "sum", result)
        ids = [x.id for x in w.history("s").turns]
    assert ids == [call, result]


def test_a_call_brought_back_for_a_result_brings_its_own_calls_too(target: str) -> None:
    def call(i: str) -> Message:
        return Message(role="assistant", content=(ToolCallPart(id=i, name="ls"),))

    def result(i: str) -> Message:
        return Message(role="tool", content=(ToolResultPart(call_id=i, content="x"),))

    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "old")])
        t1 = w.append_turn("s", [call("a")])
        t2 = w.append_turn("s", [call("b"), result("a")])
        t3 = w.append_turn("s", [result("b")])
        w.record_compaction("s", "sum", t3)
        assert [x.id for x in w.history("s").turns] == [t1, t2, t3]


def test_stats_sum_usage_and_ratio(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn(
            "s", [Message.of("user", "a")], usage=Usage(input_tokens=1000, cached_input_tokens=0)
        )
        w.append_turn(
            "s",
            [Message.of("user", "b")],
            usage=Usage(input_tokens=3000, cached_input_tokens=2000, output_tokens=5),
        )
        w.append_turn("s", [Message.of("user", "c")])
        w.record_compaction("s", "sum", None)
        s = w.stats("s")
    assert (s.turns, s.compactions, s.input_tokens, s.cached_input_tokens) == (3, 1, 4000, 2000)
    assert s.output_tokens == 5 and s.turns_with_usage == 2
    assert s.cache_hit_ratio == 0.5


def test_reader_sees_a_snapshot_while_a_writer_appends(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "a")])
        with Ledger.open(target, readonly=True) as r, r.db.read():
            before = count(r, "turns")
            w.append_turn("s", [Message.of("user", "b")])
            assert count(r, "turns") == before
        with Ledger.open(target, readonly=True) as r:
            assert len(r.history("s").turns) == 2


def test_reader_refuses_to_write(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "a")])
    with Ledger.open(target, readonly=True) as r, pytest.raises(LedgerError, match="reading only"):
        r.append_turn("s", [Message.of("user", "b")])


# -- bad input -------------------------------------------------------------------------


def test_missing_session_is_an_error(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "a")])
        with pytest.raises(LedgerError, match=r"session 'nope': no such session"):
            w.history("nope")
        with pytest.raises(LedgerError, match=r"session 'nope': no such session"):
            w.stats("nope")


def test_broken_ancestry_names_turn_and_missing_parent(target: str) -> None:
    with Ledger.open(target) as w:
        a = w.append_turn("s", [Message.of("user", "a")])
        b = w.append_turn("s", [Message.of("user", "b")])
        with w.db.write():  # corrupt the link from outside the API
            w.db.execute("UPDATE turns SET parent_id = 'ghost' WHERE id = ?", (b,))
        with pytest.raises(LedgerError) as err:
            w.history("s")
    msg = str(err.value)
    assert "session 's'" in msg and f"turn {b!r}" in msg and "'ghost' does not exist" in msg
    assert a not in msg


def test_head_naming_a_missing_turn(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "a")])
        with w.db.write():
            w.db.execute("UPDATE threads SET head_turn_id = 'gone'")
        with pytest.raises(LedgerError, match=r"session 's', turn 'gone': broken ancestry"):
            w.history("s")


def test_compaction_with_missing_first_kept_turn(target: str) -> None:
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "a")])
        c = w.record_compaction("s", "sum", None)
        with w.db.write():
            w.db.execute(
                "UPDATE compactions SET first_kept_turn_id = 'lost' WHERE turn_id = ?", (c,)
            )
        with pytest.raises(LedgerError) as err:
            w.history("s")
        msg = str(err.value)
        assert f"turn {c!r}" in msg and "'lost'" in msg and "session 's'" in msg
        # the writer refuses such a compaction up front, and writes nothing
        before = count(w, "turns")
        with pytest.raises(LedgerError, match="'missing' is not an ancestor"):
            w.record_compaction("s", "sum", "missing")
        assert count(w, "turns") == before


@pytest.mark.parametrize(
    ("content_json", "says"),
    [
        ('[{"type": "text"', "content_json is not valid JSON"),
        ('[{"type": "video"}]', "unknown part type 'video'"),
    ],
    ids=["not-json", "unknown-part"],
)
def test_unreadable_content_names_session_and_turn(
    target: str, content_json: str, says: str
) -> None:
    with Ledger.open(target) as w:
        t = w.append_turn("s", [Message.of("user", "a")])
        with w.db.write():  # corrupt the row from outside the API
            w.db.execute(
                "UPDATE messages SET content_json = ? WHERE turn_id = ?", (content_json, t)
            )
        with pytest.raises(LedgerError) as err:
            w.history("s")
    msg = str(err.value)
    assert f"turn {t!r}" in msg and "session 's'" in msg and says in msg


BAD_WRITES = {
    "missing-parent": (
        lambda w: w.append_turn("s", [Message.of("user", "b")], parent_turn_id="nowhere"),
        "parent turn 'nowhere' does not exist",
    ),
    "unknown-trigger": (
        lambda w: w.record_compaction("s", "x", None, trigger="whim"),
        "unknown compaction trigger",
    ),
    "not-a-message": (lambda w: w.append_turn("s", ["hello"]), "message 0 is a str"),
    "duplicate-id": (
        lambda w: w.append_turn("s", [Message.of("user", "dup")], turn_id=w.head("s")),
        "already exists",
    ),
    "orphan-result": (
        lambda w: w.append_turn(
            "s", [Message(role="tool", content=(ToolResultPart(call_id="x", content="?"),))]
        ),
        "tool result for call 'x' has no tool call before it",
    ),
    "image-data-not-text": (
        lambda w: w.append_turn(
            "s", [Message(role="user", content=(ImagePart(media_type="image/png", data=5),))]
        ),
        "message 0 cannot be stored",
    ),
    "count-too-large": (
        lambda w: w.append_turn("s", [Message.of("user", "b")], total_tokens=2**63),
        "total_tokens must be a whole number",
    ),
}


@pytest.mark.parametrize("name", list(BAD_WRITES))
def test_bad_writes_leave_nothing_behind(target: str, name: str) -> None:
    write, says = BAD_WRITES[name]
    with Ledger.open(target) as w:
        w.append_turn("s", [Message.of("user", "a")])
        before = (count(w, "turns"), count(w, "messages"), w.head("s"))
        with pytest.raises(LedgerError, match=says):
            write(w)
        assert (count(w, "turns"), count(w, "messages"), w.head("s")) == before
        assert len(w.history("s").turns) == 1

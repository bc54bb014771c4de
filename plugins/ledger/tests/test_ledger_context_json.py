"""The user message of a recorded turn carries the event's ``context_json`` as the Broker
design records it (platform, hook count, attachments, ``injectedAt``), read back from the
ledger and handed on in later requests' history."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import lamina_ledger.plugin as plugin
from attrs import evolve
from lamina_ledger.session import LedgerSession

from lamina import Event, ImagePart, Message
from lamina.testing import make_assembler

NOW = datetime(2026, 1, 23, 9, 0, tzinfo=UTC)


def config(db: str) -> dict[str, Any]:
    return {"model": "gpt-4o", "session": "s", "plugins": {"ledger": {"database": db}}}


def event() -> Event:
    return Event(
        content="what is on this screenshot?",
        platform="imessage",
        channel="dm",
        hook_data={"calendar": "free at 3", "weather": {"temp": 21}},
        attachments=(ImagePart(media_type="image/png", url="https://example.test/shot.png"),),
    )


EXPECTED = {
    "event": {"platform": "imessage", "hookCount": 2, "hooks": ["calendar", "weather"]}
    | {"channel": "dm"},
    "attachments": [
        {"type": "image", "mediaType": "image/png", "url": "https://example.test/shot.png"}
    ],
    "injectedAt": int(NOW.timestamp() * 1000),
}


def test_the_recorded_user_message_carries_the_events_context_json(tmp_path: Path) -> None:
    a = make_assembler(config(str(tmp_path / "l.db")), plugins=[("ledger", plugin)], now=NOW)
    with a, LedgerSession(a) as s:
        s.start("s")
        req = evolve(a.request("x"), event=event())
        s.assemble(req)
        user = Message.of("user", req.event.content)
        turn = s.record_turn(req, [user, Message.of("assistant", "a chart")])
        stored = s.ledger.turn(turn).messages
        assert stored[0].context_json == EXPECTED
        assert stored[1].context_json is None  # assistant messages: none
        with s.ledger.db.read():
            raw = s.ledger.db.one("SELECT context_json FROM messages WHERE seq = 0")
        assert raw is not None and '"hookCount": 2' in raw[0]
        later = s.assemble(a.request("and now?"))
        assert later.history[0].context_json == EXPECTED


def test_from_an_assembled_context_and_a_message_with_its_own(tmp_path: Path) -> None:
    a = make_assembler(config(str(tmp_path / "l.db")), plugins=[("ledger", plugin)], now=NOW)
    with a, LedgerSession(a) as s:
        s.start("s")
        req = evolve(a.request("x"), event=evolve(event(), id="evt-1"))
        ctx = s.assemble(req)
        turn = s.record_turn(ctx, [Message.of("user", "hi")])
        got = s.ledger.turn(turn).messages[0].context_json
        assert got == {**EXPECTED, "event": {**EXPECTED["event"], "id": "evt-1"}}
        own = Message.of("user", "hi", context_json={"mine": True})
        turn = s.record_turn(req, [own])
        assert s.ledger.turn(turn).messages[0].context_json == {"mine": True}
        # a request this session never assembled: injected at the event's time, else now
        other = evolve(a.request("y"), event=Event(content="y", time=datetime(2026, 2, 1)))
        turn = s.record_turn(other, [Message.of("user", "y")])
        stamp = s.ledger.turn(turn).messages[0].context_json
        assert stamp is not None
        assert stamp["injectedAt"] == int(datetime(2026, 2, 1, tzinfo=UTC).timestamp() * 1000)
        assert stamp["event"] == {"platform": None, "hookCount": 0} and stamp["attachments"] == []


def test_inline_images_are_recorded_by_size_not_data(tmp_path: Path) -> None:
    from lamina import attachment_record as attachment

    assert attachment(ImagePart(media_type="image/png", data="aGVsbG8=")) == {
        "type": "image",
        "mediaType": "image/png",
        "bytes": 5,
    }


def test_a_turn_recorded_by_session_label_gets_the_last_assembled_event(tmp_path: Path) -> None:
    """A host recording by label alone (an empty event, as a service does) gets the event the
    session last assembled; with none assembled, nothing is made up."""
    a = make_assembler(config(str(tmp_path / "l.db")), plugins=[("ledger", plugin)], now=NOW)
    with a, LedgerSession(a) as s:
        s.start("s")
        bare = evolve(a.request("x"), event=Event(content=""))
        turn = s.record_turn(bare, [Message.of("user", "hi")])
        assert s.ledger.turn(turn).messages[0].context_json is None
        s.assemble(evolve(a.request("x"), event=event()))
        turn = s.record_turn(bare, [Message.of("user", "what is on this screenshot?")])
        assert s.ledger.turn(turn).messages[0].context_json == EXPECTED

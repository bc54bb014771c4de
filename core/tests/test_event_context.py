"""The current message's ``context_json`` as the Broker design records it: platform, hook
count and names, attachments (never inline image data), and when the context was injected."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lamina import ImagePart
from lamina.builtins.event_plugin import iso_time
from lamina.model.event_context import merge_context_json
from lamina.testing import make_assembler

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_the_current_message_carries_the_events_record() -> None:
    a = make_assembler({"model": "gpt-4o"})
    image = ImagePart(media_type="image/png", data="aGVsbG8=")
    request = a.request(
        "look",
        platform="imessage",
        channel="dm",
        time=WHEN,
        hook_data={"weather": "rain", "calendar": {"next": "standup"}},
        attachments=(image,),
    )
    ctx = a.assemble(request)
    assert ctx.current_message.context_json == {
        "event": {
            "platform": "imessage",
            "hookCount": 2,
            "hooks": ["calendar", "weather"],
            "channel": "dm",
        },
        "attachments": [{"type": "image", "mediaType": "image/png", "bytes": 5}],
        "injectedAt": int(WHEN.timestamp() * 1000),
    }
    # The record is metadata for the host and the ledger; it is not sent as text.
    assert "hookCount" not in ctx.current_message.text


def test_without_an_event_time_it_is_injected_now() -> None:
    a = make_assembler({"model": "gpt-4o"}, now=WHEN)
    ctx = a.assemble(a.request("hi"))
    assert ctx.current_message.context_json is not None
    assert ctx.current_message.context_json["injectedAt"] == int(WHEN.timestamp() * 1000)
    assert ctx.current_message.context_json["event"] == {"platform": None, "hookCount": 0}


def test_other_current_message_blocks_add_to_the_record() -> None:
    # A working-set file placed in the current message records itself as an attachment; the
    # records are merged (lists joined), so the event's own facts are kept beside it.
    from lamina import Block, Provenance
    from lamina.testing import StaticProvider

    file_block = Block.text(
        "ws:notes.md",
        "event",
        "notes",
        provenance=Provenance(
            metadata={"context_json": {"attachments": [{"path": "notes.md", "role": "context"}]}}
        ),
    )
    a = make_assembler({"model": "gpt-4o"}, plugins=[("ws", StaticProvider([file_block]))])
    image = ImagePart(media_type="image/png", url="https://example.org/a.png")
    record = a.assemble(a.request("hi", time=WHEN, attachments=(image,))).current_message
    assert record.context_json is not None
    assert record.context_json["event"] == {"platform": None, "hookCount": 0}
    assert sorted(map(str, record.context_json["attachments"])) == sorted(
        map(
            str,
            [
                {"path": "notes.md", "role": "context"},
                {"type": "image", "mediaType": "image/png", "url": "https://example.org/a.png"},
            ],
        )
    )


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.lists(st.dictionaries(st.text(max_size=3), JSON, max_size=4), max_size=3))
def test_merged_records_are_copies_the_blocks_cannot_be_changed_through(
    records: list[dict[str, Any]],
) -> None:
    before = copy.deepcopy(records)
    merged = merge_context_json(records)
    # Changing every container of the merge leaves the blocks' records as they were.
    stack: list[Any] = [merged]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
            value["changed"] = True
        elif isinstance(value, list):
            stack.extend(value)
            value.append("changed")
    assert records == before


OFFSETS = st.one_of(
    st.none(),
    st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23)).map(
        timezone
    ),
)


@given(st.datetimes(timezones=OFFSETS))
def test_the_events_time_is_written_as_isoformat_writes_it(when: datetime) -> None:
    assert iso_time(when) == when.isoformat()

"""Invariants of the adapter kit's turn grouping, which every first-party adapter builds on."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import Message, TextPart, ToolCallPart, ToolResultPart
from lamina.adapters import LEAD_IN, turns

IDS = st.sampled_from(["a", "b", "c", "d"])
PARTS = st.one_of(
    st.builds(TextPart, text=st.sampled_from(["", "  ", "hello", "world", "x y"])),
    st.builds(ToolCallPart, id=IDS, name=st.sampled_from(["read", "grep"])),
    st.builds(
        ToolResultPart, call_id=IDS, content=st.sampled_from(["out", "err"]), is_error=st.booleans()
    ),
)
MESSAGES = st.lists(
    st.builds(
        Message,
        role=st.sampled_from(["user", "assistant", "tool", "system"]),
        content=st.lists(PARTS, min_size=0, max_size=3).map(tuple),
    ),
    max_size=8,
)


def _all_text(parts) -> str:
    return "\n".join(
        p.text
        if isinstance(p, TextPart)
        else p.content
        if isinstance(p, ToolResultPart)
        else p.name
        for p in parts
    )


@settings(max_examples=300, deadline=None)
@given(MESSAGES)
def test_turns_alternate_pair_every_call_and_lose_nothing(messages: list[Message]) -> None:
    out = turns(messages)
    assert out == turns(messages)  # deterministic
    roles = [t.role for t in out]
    assert all(a != b for a, b in itertools.pairwise(roles))
    if out:
        assert out[0].role == "user"
    for i, turn in enumerate(out):
        calls = [p.id for p in turn.parts if isinstance(p, ToolCallPart)]
        results = [p.call_id for p in turn.parts if isinstance(p, ToolResultPart)]
        if turn.role == "assistant":
            assert not results
            following = out[i + 1] if i + 1 < len(out) else None
            answered = (
                []
                if following is None
                else [p.call_id for p in following.parts if isinstance(p, ToolResultPart)]
            )
            assert calls == answered  # every call answered next, in call order, once
        else:
            assert not calls
            n = len(results)
            assert all(isinstance(p, ToolResultPart) for p in turn.parts[:n])  # results first
    text = _all_text(p for t in out for p in t.parts)
    for message in messages:
        for part in message.content:
            piece = _all_text([part])
            if piece.strip():
                assert piece in text


def test_lead_in_only_when_the_assistant_speaks_first() -> None:
    out = turns([Message.of("assistant", "hi"), Message.of("user", "yo")])
    assert [t.role for t in out] == ["user", "assistant", "user"]
    assert out[0].parts == (TextPart(text=LEAD_IN),)
    assert turns([Message.of("assistant", "hi")], lead_in=None)[0].role == "assistant"
    assert turns([]) == []


def test_orphans_become_notes_in_place() -> None:
    call = ToolCallPart(id="x1", name="grep", arguments={"q": "todo"})
    out = turns(
        [
            Message(role="tool", content=(ToolResultPart(call_id="zz", content="stale"),)),
            Message(role="assistant", content=(call,)),
            Message.of("user", "next"),
        ]
    )
    assert out[0].parts == (TextPart(text="[tool result for call zz]\nstale"),)
    assert out[1].parts == (
        TextPart(text='[tool call grep (id x1) with arguments {"q": "todo"}: no result recorded]'),
    )

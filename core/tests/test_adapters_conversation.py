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


CURRENT = st.builds(
    Message, role=st.just("user"), content=st.lists(PARTS, min_size=0, max_size=2).map(tuple)
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(MESSAGES, CURRENT, st.booleans(), st.sampled_from(["s1", "s2"])), max_size=6
    ),
    lead_in=st.sampled_from([LEAD_IN, None]),
)
def test_context_turns_are_the_turns_of_the_whole_conversation(steps, lead_in) -> None:
    """A session's history turns are kept between calls and only its last turns are grouped
    and paired again; whatever the history grew by (a merge into its last turn, a result
    pairing a call, several sessions, a history that did not grow from the last one), the
    turns are those of the whole conversation."""
    from attrs import evolve

    from lamina import Chunked
    from lamina.adapters import context_turns
    from lamina.testing.adapter_contexts import make_context

    base = make_context(model="m", provider="p")
    histories: dict[str, Chunked[Message]] = {}
    for added, current, fresh, session in steps:
        before = histories.get(session, Chunked())
        history = Chunked(tuple(before) + tuple(added)) if fresh else before.grown(added)
        histories[session] = history
        context = evolve(base, history=history, current_message=current, session_label=session)
        assert context_turns(context, lead_in=lead_in) == turns(
            [*history, current], lead_in=lead_in
        )


def test_context_turns_group_only_the_last_turns_again(monkeypatch) -> None:
    """Once a session's history is kept, a request that adds a turn groups a few messages,
    not the whole conversation."""
    from attrs import evolve

    import lamina.adapters.conversation as conversation
    from lamina import Chunked
    from lamina.adapters import context_turns
    from lamina.testing.adapter_contexts import make_context

    grouped: list[int] = []
    merged = conversation._merged

    def counting(messages, into, *, offset=0):  # type: ignore[no-untyped-def]
        grouped.append(len(messages))
        return merged(messages, into, offset=offset)

    monkeypatch.setattr(conversation, "_merged", counting)
    history: Chunked[Message] = Chunked(
        Message.of("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(1000)
    )
    base = make_context(model="m", provider="p", history=())
    context_turns(evolve(base, history=history, session_label="long"))
    assert sum(grouped) > 1000
    grouped.clear()
    history = history.grown([Message.of("user", "next"), Message.of("assistant", "ok")])
    context_turns(evolve(base, history=history, session_label="long"))
    assert sum(grouped) < 10

"""History the host passes with the request: served by the built-in ``history`` layer under
the same rules as stored history, converted from OpenAI, Anthropic and LangChain messages,
and chosen over (or under) a plugin's history by config."""

from __future__ import annotations

import asyncio

import pytest

import lamina
from lamina import Block, Message, TextPart, ToolCallPart, ToolResultPart
from lamina.converters import from_anthropic_messages, from_langchain_messages, from_openai_chat
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import words


def chat(turns: int, *, tools: bool = False) -> tuple[Message, ...]:
    out: list[Message] = []
    for n in range(turns):
        out.append(Message.of("user", f"question {n} {words(30, n)}"))
        if tools:
            call = ToolCallPart(id=f"c{n}", name="read_file", arguments={"path": f"f{n}"})
            out.append(Message(role="assistant", content=(call,)))
            out.append(
                Message(
                    role="tool", content=(ToolResultPart(call_id=f"c{n}", content=words(80, n)),)
                )
            )
        out.append(Message.of("assistant", f"answer {n} {words(30, n + 1)}"))
    return tuple(out)


def test_the_hosts_history_is_the_context_history():
    history = chat(3)
    a = make_assembler()
    ctx = a.assemble(a.request("next", history=history))
    assert tuple(ctx.history) == history
    assert ctx.report.history_source == "request"


def test_request_history_is_cut_whole_turns_with_tool_pairs_by_the_strategy():
    a = make_assembler({"fit": {"minimum_recent": 2}})
    ctx = a.assemble(a.request("next", history=chat(30, tools=True), max_tokens=2500))
    calls = {p.id for m in ctx.history for p in m.content if isinstance(p, ToolCallPart)}
    results = {p.call_id for m in ctx.history for p in m.content if isinstance(p, ToolResultPart)}
    assert calls == results and "c29" in calls and "c28" in calls
    assert "c15" not in calls  # truncateMiddle keeps the first and last turns
    assert any(r.id.startswith("history:gap") for r in ctx.report.blocks)
    assert ctx.token_budget.used.total <= 2500


def test_a_system_message_goes_to_the_system_prompt():
    a = make_assembler()
    history = (Message.of("system", "You are terse."), *chat(1))
    ctx = a.assemble(a.request("next", history=history))
    assert "You are terse." in ctx.system_prompt
    assert all(m.role != "system" for m in ctx.history)


def test_unpaired_tool_calls_and_results_are_left_out_with_a_warning():
    history = (
        Message.of("user", "go"),
        Message(role="assistant", content=(ToolCallPart(id="lost", name="x"),)),
        Message(role="tool", content=(ToolResultPart(call_id="ghost", content="?"),)),
        Message.of("assistant", "done"),
    )
    a = make_assembler()
    ctx = a.assemble(a.request("next", history=history))
    assert [m.text for m in ctx.history] == ["go", "done"]
    assert sum("has no result" in w or "has no call" in w for w in ctx.report.warnings) == 2


class StoredHistory(StaticProvider):
    def __init__(self) -> None:
        super().__init__(
            [Block.text("stored:1", "session", "stored question", role="user", group="s1")],
            name="stored",
        )


@pytest.mark.parametrize(
    ("prefer", "source", "text"),
    [("request", "request", "question 0"), ("plugins", "ledgerish", "stored question")],
)
def test_config_decides_between_request_and_plugin_history(prefer, source, text):
    a = make_assembler({"history": {"prefer": prefer}}, plugins=[("ledgerish", StoredHistory())])
    ctx = a.assemble(a.request("next", history=chat(1)))
    assert ctx.report.history_source == source
    assert text in ctx.history[0].text
    assert any("[history] prefer" in w for w in ctx.report.warnings)


def test_without_request_history_the_report_names_the_plugin():
    a = make_assembler(plugins=[("ledgerish", StoredHistory())])
    assert a.assemble(a.request("next")).report.history_source == "ledgerish"


def test_openai_chat_messages_convert_with_tool_calls_and_images():
    messages = [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"p": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "assistant", "content": "It is 42."},
    ]
    out = from_openai_chat(messages)
    assert [m.role for m in out] == ["system", "user", "assistant", "tool", "assistant"]
    assert out[1].content[1] == lamina.ImagePart(media_type="image/png", data="AAAA")
    assert out[2].content == (ToolCallPart(id="c1", name="read", arguments={"p": 1}),)
    assert out[3].content == (ToolResultPart(call_id="c1", content="42"),)


def test_anthropic_messages_convert_tool_results_into_tool_messages():
    messages = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "checking"},
                {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Lyon"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "sunny"}],
                },
                {"type": "text", "text": "thanks"},
            ],
        },
    ]
    out = from_anthropic_messages(messages, system="Be brief.")
    assert [m.role for m in out] == ["system", "user", "assistant", "tool", "user"]
    assert out[3].content == (ToolResultPart(call_id="t1", content="sunny"),)


def test_langchain_messages_convert():
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out = from_langchain_messages(
        [
            SystemMessage("Be brief."),
            HumanMessage("weather?"),
            AIMessage("", tool_calls=[{"id": "t1", "name": "weather", "args": {"city": "Lyon"}}]),
            ToolMessage("sunny", tool_call_id="t1"),
        ]
    )
    assert [m.role for m in out] == ["system", "user", "assistant", "tool"]
    assert out[2].content == (ToolCallPart(id="t1", name="weather", arguments={"city": "Lyon"}),)


@pytest.mark.parametrize(
    ("convert", "messages", "says"),
    [
        (
            from_openai_chat,
            [{"role": "wizard", "content": "x"}],
            "unknown role 'wizard' @ $[0].role",
        ),
        (
            from_openai_chat,
            [
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}],
                }
            ],
            "not JSON",
        ),
        (from_openai_chat, ["hello"], "expected a message object, got str @ $[0]"),
        (
            from_anthropic_messages,
            [{"role": "user", "content": [{"type": "video"}]}],
            "unsupported block type 'video'",
        ),
    ],
)
def test_malformed_messages_are_errors_naming_index_and_field(convert, messages, says):
    with pytest.raises(
        lamina.SerdeError,
        match=says.replace("$", r"\$").replace("[", r"\[").replace("]", r"\]").replace("(", r"\("),
    ):
        convert(messages)


def test_aassemble_matches_assemble_from_many_tasks():
    a = make_assembler()
    requests = [a.request(f"question {i}", history=chat(i % 4)) for i in range(8)]
    serial = [a.assemble(r) for r in requests]

    async def all_at_once():
        return await asyncio.gather(*(a.aassemble(r) for r in requests))

    together = asyncio.run(all_at_once())
    strip = lambda c: lamina.to_json(c).split('"timings_ms"')[0]  # noqa: E731
    assert [strip(c) for c in together] == [strip(c) for c in serial]
    assert isinstance(together[0].current_message.content[0], TextPart)

"""The kit's sending (``Transport``, ``sending``) and LLM summarizer (``llm_summarizer``), and
the ``Summarizer`` record's optional instructions. Requests go to a local server
(``lamina.testing.wire_server``) through httpx, a real HTTP client standing in for an SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from attrs import field, frozen

from lamina import Adapter, AgentResult, Block, ConfigError, Message, Provenance, Summarizer, Usage
from lamina.adapters import (
    COMPACTION_PROMPT,
    AdapterPlugin,
    ContextOverflowError,
    LlmSummarizerSettings,
    MissingSDKError,
    ModelOverride,
    Reply,
    SendError,
    SendSettings,
    SummaryError,
    Transport,
    call_part,
    count,
    llm_summarizer,
    overflow_detector,
    sending,
    stop_reason,
)
from lamina.model import AssembledContext, TextPart, ToolCallPart, ToolResultPart
from lamina.testing import FakeTokenizer, make_assembler
from lamina.testing.adapter_contexts import make_context
from lamina.testing.wire_server import Answer, WireServer

TOK = FakeTokenizer()


def _echo_build(ctx: AssembledContext, options: Mapping[str, Any]) -> dict[str, Any]:
    return {"system": ctx.system_prompt, "user": ctx.current_message.text, **options}


def _reply(response: Any) -> Reply:
    return Reply(
        message=Message.of("assistant", response["text"]),
        stop_reason=stop_reason(response["stop"], tool_calls=False),
    )


class EchoError(Exception):
    """What an SDK raises for an error status: the status and the provider's message."""

    def __init__(self, status_code: int, message: str) -> None:
        self.status_code = status_code
        super().__init__(message)


def _read(answer: Any) -> Any:
    if answer.status_code >= 400:
        raise EchoError(answer.status_code, answer.text)
    return answer.json()


def httpx_transport(url: str, sdk: str = "httpx") -> Transport:
    import httpx

    def call(client: Any, payload: dict[str, Any], model: str) -> Any:
        return _read(client.post(f"{url}/echo/{model}", json=payload))

    async def acall(client: Any, payload: dict[str, Any], model: str) -> Any:
        return _read(await client.post(f"{url}/echo/{model}", json=payload))

    return Transport(
        plugin="echo",
        sdk=sdk,
        extra="lamina-echo[sdk]",
        client=httpx.Client,
        aclient=httpx.AsyncClient,
        call=call,
        acall=acall,
        reply=_reply,
        endpoint=f"{url}/echo",
    )


ECHO = Adapter(
    name="echo",
    build_request=_echo_build,
    parse_usage=lambda r: Usage(
        input_tokens=count(r, "in"), cached_input_tokens=count(r, "cached")
    ),
    is_context_overflow=overflow_detector("too long"),
)
ANSWER = Answer(body={"text": "Hello.", "stop": "stop", "in": 12, "cached": 8})


def test_send_posts_the_built_payload_and_returns_an_agent_result() -> None:
    with WireServer(ANSWER) as server:
        adapter = sending(ECHO, httpx_transport(server.url))
        ctx = make_context(model="m1", provider="echo")
        assert adapter.send is not None
        result = adapter.send(ctx, {"max_tokens": 5, "stream": True})
    assert server.requests[0].path == "/echo/m1"
    assert server.requests[0].body == _echo_build(ctx, {"max_tokens": 5, "stream": False})
    assert result == AgentResult(
        messages=(Message.of("assistant", "Hello."),),
        usage=Usage(input_tokens=12, cached_input_tokens=8),
        stop_reason="end_turn",
        model="m1",
        provider="echo",
    )


def test_asend_makes_one_client_per_event_loop() -> None:
    made: list[object] = []
    with WireServer(ANSWER) as server:
        transport = httpx_transport(server.url)
        import httpx

        def aclient() -> Any:
            made.append(object())
            return httpx.AsyncClient()

        from attrs import evolve

        adapter = sending(ECHO, evolve(transport, aclient=aclient))
        assert adapter.asend is not None
        asend, ctx = adapter.asend, make_context(model="m1", provider="echo")

        async def three() -> list[AgentResult]:
            return [await asend(ctx, {}) for _ in range(3)]

        first, second = asyncio.run(three()), asyncio.run(three())
    assert len(made) == 2 and len(server.requests) == 6
    assert all(r.messages[0].text == "Hello." for r in first + second)


def test_errors_are_classified_by_the_adapters_overflow_check() -> None:
    with WireServer(Answer(status=400, text="prompt too long"), Answer(status=503)) as server:
        adapter = sending(ECHO, httpx_transport(server.url))
        assert adapter.send is not None
        ctx = make_context(model="m1", provider="echo")
        with pytest.raises(ContextOverflowError) as overflow:
            adapter.send(ctx, {})
        with pytest.raises(SendError) as other:
            adapter.send(ctx, {})
    assert overflow.value.status == 400 and ECHO.is_context_overflow(overflow.value)
    assert other.value.status == 503 and not ECHO.is_context_overflow(other.value)
    assert str(other.value).startswith("plugin 'echo': adapter 'echo': sending to http://127.0.0.1")


def test_a_missing_sdk_names_the_extra_and_sends_nothing() -> None:
    with WireServer(ANSWER) as server:
        adapter = sending(ECHO, httpx_transport(server.url, sdk="lamina_no_such_sdk"))
        assert adapter.send is not None
        with pytest.raises(MissingSDKError, match=r"pip install 'lamina-echo\[sdk\]'"):
            adapter.send(make_context(model="m1", provider="echo"), {})
    assert server.requests == []


def test_an_unreadable_reply_is_a_send_error() -> None:
    with WireServer(Answer(body={"no": "text"})) as server:
        adapter = sending(ECHO, httpx_transport(server.url))
        assert adapter.send is not None
        with pytest.raises(SendError, match="could not read the provider's reply"):
            adapter.send(make_context(model="m1", provider="echo"), {})


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("stop", False, "end_turn"),
        ("STOP", True, "tool_use"),
        ("tool_calls", True, "tool_use"),
        ("length", False, "max_tokens"),
        ("MAX_TOKENS", False, "max_tokens"),
        ("max_output_tokens", False, "max_tokens"),
        ("content_filter", False, "refusal"),
        ("SAFETY", False, "refusal"),
        (None, False, "end_turn"),
        ("RECITATION", False, "recitation"),
    ],
)
def test_stop_reasons_in_the_kernels_words(raw: Any, calls: bool, expected: str) -> None:
    assert stop_reason(raw, tool_calls=calls) == expected


def test_call_part_wraps_what_is_not_an_object() -> None:
    assert call_part("c", "f", '{"a": 1}').arguments == {"a": 1}
    assert call_part("c", "f", "").arguments == {}
    assert call_part("c", "f", "oops").arguments == {"value": "oops"}


def test_api_key_env_must_be_set_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAMINA_TEST_UNSET_KEY", raising=False)
    assert SendSettings().api_key() is None
    with pytest.raises(ConfigError, match="LAMINA_TEST_UNSET_KEY"):
        SendSettings(api_key_env="LAMINA_TEST_UNSET_KEY").api_key()


# -- the Summarizer record: instructions are optional -------------------------------------


def test_run_hands_instructions_only_to_a_summarizer_that_takes_them() -> None:
    seen: list[Any] = []

    def old(blocks: Any, limit: int, tok: Any) -> str:  # a summarizer written before them
        seen.append("old")
        return "old"

    def new(blocks: Any, limit: int, tok: Any, *, instructions: str | None = None) -> str:
        seen.append(instructions)
        return "new"

    def loose(blocks: Any, limit: int, tok: Any, **extra: Any) -> str:
        seen.append(extra)
        return "loose"

    a, b, c = (Summarizer(name=n, summarize=f) for n, f in [("a", old), ("b", new), ("c", loose)])
    assert (a.takes_instructions, b.takes_instructions, c.takes_instructions) == (False, True, True)
    assert a.run([], 10, TOK, instructions="keep paths") == "old"
    assert b.run([], 10, TOK, instructions="keep paths") == "new"
    assert c.run([], 10, TOK, instructions="keep paths") == "loose"
    assert b.run([], 10, TOK) == "new"
    assert seen == ["old", "keep paths", {"instructions": "keep paths"}, None]


# -- the LLM summarizer --------------------------------------------------------------------


@frozen
class Model:
    """An adapter whose ``send`` answers like a model would, keeping what it was sent."""

    answer: str = "Goal: ship it"
    sent: list[tuple[AssembledContext, dict[str, Any]]] = field(factory=list)

    def send(self, ctx: AssembledContext, options: Mapping[str, Any]) -> AgentResult:
        self.sent.append((ctx, dict(options)))
        return AgentResult(messages=(Message.of("assistant", self.answer),), stop_reason="end_turn")

    def adapter(self) -> Adapter:
        return Adapter(
            name="m", build_request=_echo_build, parse_usage=lambda r: Usage(), send=self.send
        )


def _blocks() -> list[Block]:
    return [
        Block.text(
            "p",
            "session",
            "[Previous conversation summary]\nGoal: old goal",
            provenance=Provenance(metadata={"summary": "Goal: old goal"}),
        ),
        Block.text("u", "session", "Please move src/app.py to lib/app.py.", role="user"),
        Block(
            id="c",
            layer="session",
            role="assistant",
            content=(ToolCallPart(id="k1", name="read", arguments={"path": "src/app.py"}),),
        ),
        Block(
            id="r",
            layer="session",
            role="tool",
            content=(ToolResultPart(call_id="k1", content="x" * 9000),),
        ),
        Block.text(
            "a", "session", "Moved it; we keep the old import path as an alias.", role="assistant"
        ),
    ]


def test_the_prompt_holds_the_layout_instructions_cap_and_previous_summary() -> None:
    model = Model()
    summarizer = llm_summarizer(
        model.adapter(), model="small", name="s", instructions="Keep every path."
    )
    assert summarizer.takes_instructions
    text = summarizer.run(_blocks(), 120, TOK, instructions="Mention aliases.")
    ctx, options = model.sent[0]
    assert text == "Goal: ship it" and ctx.model == "small" and ctx.provider == "m"
    assert ctx.system_prompt.startswith(COMPACTION_PROMPT)
    assert ctx.system_prompt.endswith(
        "Additional instructions:\nKeep every path.\nMention aliases."
    )
    assert "Write at most 120 tokens." in ctx.system_prompt
    for line in ("Goal: <", "Decisions:", "Open asks:", "Identifiers:"):
        assert line in COMPACTION_PROMPT
    user = ctx.current_message.text
    assert user.startswith("<previous_summary>\nGoal: old goal\n</previous_summary>")
    assert "[user] Please move src/app.py to lib/app.py." in user
    assert '[assistant calls tool read] {"path": "src/app.py"}' in user
    assert "[tool result of read] xxx" in user and "characters left out" in user
    assert len(user) < 4000  # the 9000-character result was cut in the middle
    assert options["max_tokens"] > 120 and ctx.history == ()


def test_the_configured_cap_and_the_callers_limit_both_cap_the_summary() -> None:
    long = "\n".join(f"- decision number {i} about src/file_{i}.py" for i in range(200))
    model = Model(answer=long)
    summarizer = llm_summarizer(model.adapter(), model="small", max_tokens=50)
    text = summarizer.run(_blocks(), 400, TOK)
    assert "Write at most 50 tokens." in model.sent[0][0].system_prompt
    assert 0 < TOK.count(text) <= 50 and text.endswith(".py")  # cut at a line end
    assert TOK.count(summarizer.run(_blocks(), 30, TOK)) <= 30


def test_a_conversation_too_long_for_the_window_keeps_the_first_ask_and_the_newest() -> None:
    blocks = [Block.text("goal", "session", "Port the parser to Rust.", role="user")]
    blocks += [
        Block.text(f"b{i}", "session", f"message {i} " + "word " * 60, role="assistant")
        for i in range(200)
    ]
    model = Model()
    llm_summarizer(model.adapter(), model="small", context_window=4000).run(blocks, 200, TOK)
    user = model.sent[0][0].current_message.text
    assert "[user] Port the parser to Rust." in user and "message 199 " in user
    assert "message 1 " not in user and "messages left out here" in user
    assert TOK.count(user) < 4000


def test_an_empty_reply_or_an_adapter_that_cannot_send_is_a_summary_error() -> None:
    with pytest.raises(SummaryError, match="empty"):
        llm_summarizer(Model(answer="  ").adapter(), model="x").run(_blocks(), 100, TOK)
    mute = Adapter(name="mute", build_request=_echo_build, parse_usage=lambda r: Usage())
    with pytest.raises(SummaryError, match="cannot send"):
        llm_summarizer(mute, model="x").run(_blocks(), 100, TOK)


# -- AdapterPlugin registers the summarizer its settings ask for --------------------------


@frozen(kw_only=True)
class EchoSettings(SendSettings):
    models: dict[str, ModelOverride] = field(factory=dict)


def _plugin(url: str) -> AdapterPlugin[EchoSettings]:
    return AdapterPlugin(
        provider="echo",
        settings_class=EchoSettings,
        adapters=lambda s: [ECHO],
        model_info=lambda model, overrides: None,
        transport=lambda s, name: httpx_transport(url),
    )


def test_a_summarizer_table_registers_provider_llm_through_the_adapter() -> None:
    with WireServer(ANSWER) as server:
        plugin = _plugin(server.url)
        bare = make_assembler({}, plugins=[("echo", plugin)])
        with pytest.raises(ConfigError, match="no summarizer 'echo-llm'"):
            bare.summarizer("echo-llm")
        config = {"plugins": {"echo": {"summarizer": {"model": "m2", "max_tokens": 80}}}}
        a = make_assembler(config, plugins=[("echo", plugin)])
        text = a.summarizer("echo-llm").run(_blocks(), 200, TOK)
    assert text == "Hello."
    sent = server.requests[0]
    assert sent.path == "/echo/m2" and "Write at most 80 tokens." in sent.body["system"]
    assert LlmSummarizerSettings(model="m").name is None


def test_a_summarizer_through_an_unknown_adapter_is_a_config_error() -> None:
    config = {"plugins": {"echo": {"summarizer": {"model": "m2", "adapter": "nope"}}}}
    with pytest.raises(ConfigError, match=r"plugins\.echo\.summarizer\.adapter.*'nope'"):
        make_assembler(config, plugins=[("echo", _plugin("http://127.0.0.1:9"))]).summarizer(
            "echo-llm"
        )


def test_payloads_in_the_request_body_are_json() -> None:
    with WireServer(ANSWER) as server:
        adapter = sending(ECHO, httpx_transport(server.url))
        assert adapter.send is not None
        adapter.send(make_context(model="m1", provider="echo", current="caf\ud800"), {})
    assert json.dumps(server.requests[0].body)  # the lone surrogate was made encodable
    assert "\ufffd" in server.requests[0].body["user"]
    assert isinstance(server.requests[0].body, dict)
    assert TextPart(text="x").text == "x"

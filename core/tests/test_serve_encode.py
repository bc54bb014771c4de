"""The service writes an assembled context from the stream's last reply (``ContextEncoder``):
the bytes stay the kernel's own (``dumps(unstructure(ctx))``, the JSON ``lamina assemble
--format json`` prints) whatever the session does: warm repeated requests, growing history,
tool calls and results, capped and stubbed tool results, compaction, history cut from the
front, items reordered or repeated; what it keeps is bounded; and it does reuse."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from attrs import evolve
from starlette.testclient import TestClient

from lamina import Assembler, Message, TextPart, ToolCallPart, ToolResultPart
from lamina.model.report import BlockReport
from lamina.serde import to_json, unstructure
from lamina.serve.app import create_app, dumps
from lamina.serve.encode import ContextEncoder
from lamina.serve.service import Service
from lamina.testing import make_assembler

BASE = "http://127.0.0.1"


class Capturing(Service):
    """The service, keeping each context it assembled (to serialize it the kernel's way)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.contexts: list[Any] = []

    async def assemble(self, body: Any) -> Any:
        ctx = await super().assemble(body)
        self.contexts.append(ctx)
        return ctx


def same_as_the_kernel(reply: Any, ctx: Any) -> None:
    """The reply is ``dumps(unstructure(ctx))`` byte for byte, and the command line's JSON."""
    assert reply.status_code == 200, reply.text
    assert reply.content == dumps(unstructure(ctx))
    assert json.loads(reply.content) == json.loads(to_json(ctx, indent=2))


# -- through the service, with the ledger on SQLite --------------------------------------------


def ledger_config(tmp_path: Any) -> str:
    path = tmp_path / "lamina.toml"
    path.write_text(
        'model = "gpt-4o"\n[budget]\nreserve_response = 0\nreserve_tools = 0\n'
        '[[blocks]]\nid = "rules"\ntext = "Answer briefly."\n'
        "[tool_results]\nmax_tokens = 300\nstub_after = 3\nstub_over = 60\n"
        '[plugins.ledger]\ndatabase = "ledger.db"\nminimum_turns = 2\n',
        encoding="utf-8",
    )
    return str(path)


def turn(ctx: dict[str, Any], n: int) -> dict[str, Any]:
    """A tool call and its result (some over the cap, some stubbed later), then an answer."""
    call = {"type": "tool_call", "id": f"call-{n}", "name": "read_file", "arguments": {"n": n}}
    size = 400 if n % 3 == 0 else 30
    result = {"type": "tool_result", "call_id": f"call-{n}", "content": f"line {n} é\n" * size}
    used = ctx["token_budget"]["used"]["total"]
    return {
        "messages": [
            ctx["current_message"],
            {"role": "assistant", "content": [call]},
            {"role": "tool", "content": [result]},
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {n} ✓"}]},
        ],
        "usage": {"input_tokens": used, "cached_input_tokens": used // 2, "output_tokens": 9},
    }


def test_a_ledger_sessions_replies_are_the_kernels_json_turn_after_turn(tmp_path, monkeypatch):
    pytest.importorskip("lamina_ledger")
    monkeypatch.setenv("LAMINA_PLUGINS", "ledger")
    monkeypatch.chdir(tmp_path)
    service = Capturing(Assembler.from_config(ledger_config(tmp_path)))
    encoder = ContextEncoder(dumps)
    strategies: set[str | None] = set()
    with TestClient(create_app(service, encoder=encoder), base_url=BASE) as client:
        for n in range(16):
            body: dict[str, Any] = {"message": f"question {n}", "session_label": "s"}
            if n >= 10:  # a small budget: the ledger compacts before it assembles
                body["max_tokens"] = 1500
            for _ in range(2):  # the same request again: a warm repeat
                reply = client.post("/v1/assemble", json=body)
                same_as_the_kernel(reply, service.contexts[-1])
            strategies |= {b.strategy for b in service.contexts[-1].report.blocks}
            recorded = client.post("/v1/sessions/s/turns", json=turn(reply.json(), n))
            assert recorded.status_code == 201, recorded.text
            if n == 6:
                done = client.post("/v1/sessions/s/compact", json={"target": 0.2})
                assert done.status_code == 200 and done.json()["compacted"], done.text
        stats = client.get("/v1/sessions/s/stats").json()
    assert stats["compactions"] >= 2  # the manual one and the budget's
    assert {"tool_result_cap", "tool_result_stub"} <= strategies
    assert encoder.reused > 2 * encoder.written  # most of each reply came from the last


def test_request_history_and_other_sessions_are_the_kernels_json_too():
    service = Capturing(make_assembler({"model": "gpt-4o"}))
    encoder = ContextEncoder(dumps)
    history = [
        {"role": "user", "content": [{"type": "text", "text": "hello"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    ]
    with TestClient(create_app(service, encoder=encoder), base_url=BASE) as client:
        for n in range(3):
            for label in ("a", "b"):
                body = {"message": f"m{n}", "session_label": label, "history": history}
                same_as_the_kernel(client.post("/v1/assemble", json=body), service.contexts[-1])
            history.append({"role": "user", "content": [{"type": "text", "text": f"more {n}"}]})
    assert encoder.held()[0] == 2


# -- the encoder itself --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base() -> Any:
    a = make_assembler({"model": "gpt-4o"})
    return a.assemble(a.request("now", session_label="x"))


def pool(size: int) -> tuple[list[Message], list[BlockReport]]:
    messages: list[Message] = []
    for n in range(size):
        call = ToolCallPart(id=f"c{n}", name="grep", arguments={"q": n, "deep": [1.5, None]})
        messages.append(
            [
                Message.of("user", f"question {n} «ü»"),
                Message(role="assistant", content=(call,)),
                Message(role="tool", content=(ToolResultPart(call_id=f"c{n}", content="x" * n),)),
                Message(role="assistant", content=(TextPart(text=f"a{n}"),), context_json={"n": n}),
            ][n % 4]
        )
    reports = [
        BlockReport(
            id=f"b{n}",
            layer="history",
            placement="history",
            plugin="p",
            status="kept",
            tokens=n,
            original_tokens=n,
            details={"n": n},
        )
        for n in range(size)
    ]
    return messages, reports


def context(base: Any, history: list[Message], blocks: list[BlockReport], label: str = "x") -> Any:
    return evolve(
        base,
        history=tuple(history),
        session_label=label,
        report=evolve(base.report, blocks=tuple(blocks)),
    )


def test_any_sequence_of_the_same_and_new_objects_gives_the_kernels_bytes(base):
    """Growth, cuts from the front and the middle, replacements, reordering, repeats and
    empty arrays, at random: every reply is ``dumps(unstructure(ctx))``."""
    rng = random.Random(7)
    messages, reports = pool(300)
    encoder = ContextEncoder(dumps)
    history, blocks = messages[:20], reports[:20]
    for _ in range(400):
        ctx = context(base, history, blocks)
        assert encoder.encode(ctx) == dumps(unstructure(ctx))
        history = change(rng, history, messages)
        blocks = change(rng, blocks, reports)
    assert encoder.reused > encoder.written


def change(rng: random.Random, items: list[Any], pool: list[Any]) -> list[Any]:
    """One of the ways a context changes from one reply to the next."""
    how = rng.randrange(8)
    n = len(items)
    if how == 0:  # grown by a turn
        return items + rng.sample(pool, 4)
    if how == 1 and n:  # the oldest cut
        return items[rng.randrange(1, n + 1) :]
    if how == 2 and n:  # a run cut from the middle, a marker in its place
        i = rng.randrange(n)
        return [*items[:i], rng.choice(pool), *items[i + rng.randrange(1, 6) :]]
    if how == 3 and n:  # some replaced (capped, stubbed): new objects, same JSON or not
        return [evolve(x) if rng.random() < 0.2 else x for x in items]
    if how == 4:  # reordered and repeated
        return rng.sample(items, len(items)) + items[: rng.randrange(3)]
    if how == 5:
        return []
    return items  # the same again


def test_it_reuses_what_the_last_reply_held_and_only_that(base):
    messages, reports = pool(40)
    encoder = ContextEncoder(dumps)
    encoder.encode(context(base, messages[:30], reports[:30]))
    assert (encoder.written, encoder.reused) == (60, 0)
    encoder.encode(context(base, messages[:34], reports[:34]))
    assert (encoder.written, encoder.reused) == (68, 60)
    encoder.encode(context(base, messages[:30], reports[:30]))  # the same objects, still held
    assert (encoder.written, encoder.reused) == (68, 120)
    copies = [evolve(m) for m in messages[:30]]  # equal, not the same: written again
    encoder.encode(context(base, copies, reports[:30]))
    assert (encoder.written, encoder.reused) == (98, 150)


def test_what_it_keeps_is_bounded_by_streams_and_bytes(base):
    messages, reports = pool(50)
    encoder = ContextEncoder(dumps, streams=3)
    for label in ("a", "b", "c", "d"):
        encoder.encode(context(base, messages, reports, label))
    assert encoder.held()[0] == 3
    encoder.encode(context(base, messages, reports, "a"))  # "a" went first: written again
    assert encoder.written == 5 * 100 and encoder.reused == 0
    one = len(dumps(unstructure(context(base, messages, reports))))
    small = ContextEncoder(dumps, memo_bytes=2 * one + 10)
    for label in ("a", "b", "c"):
        small.encode(context(base, messages, reports, label))
    assert small.held()[0] == 2 and small.held()[1] <= 2 * one + 10
    tiny = ContextEncoder(dumps, memo_bytes=100)
    tiny.encode(context(base, messages, reports))
    assert tiny.held() == (0, 0)


def test_a_value_orjson_refuses_sends_the_whole_reply_the_old_way(base):
    huge = Message.of("user", "big", context_json={"n": 2**70})
    encoder = ContextEncoder(dumps)
    ctx = context(base, [huge], [])
    assert encoder.encode(ctx) == dumps(unstructure(ctx))
    assert b"1180591620717411303424" in encoder.encode(ctx)


def test_without_orjson_fragments_it_writes_the_whole_context(base, monkeypatch):
    messages, reports = pool(10)
    encoder = ContextEncoder(dumps)
    monkeypatch.setattr(encoder, "_orjson", None)
    ctx = context(base, messages, reports)
    assert encoder.encode(ctx) == encoder.encode(ctx) == dumps(unstructure(ctx))
    assert encoder.held() == (0, 0) and encoder.written == encoder.reused == 0


# -- the tools a host offers -------------------------------------------------------------------


def offered(n: int, tag: str = "") -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"path": {"type": "string", "description": "é"}}}
    return [
        {"name": f"tool_{i}{tag}", "description": f"does thing {i}", "input_schema": schema}
        for i in range(n)
    ]


def test_the_same_tools_are_decoded_once_and_written_once():
    service = Capturing(make_assembler({"model": "gpt-4o"}))
    encoder = ContextEncoder(dumps)
    tools, other = offered(40), offered(40, "b")
    with TestClient(create_app(service, encoder=encoder), base_url=BASE) as client:
        for n, sent in enumerate([tools, tools, other, tools, tools[:10]]):
            body = {"message": f"question {n}", "session_label": "s", "tools": sent}
            before = encoder.reused
            same_as_the_kernel(client.post("/v1/assemble", json=body), service.contexts[-1])
            if n == 1:  # the same list again: the same Tool objects, their JSON reused
                assert service.contexts[1].tools[0] is service.contexts[0].tools[0]
                assert encoder.reused - before >= 40
        assert service.contexts[3].tools[0] is service.contexts[0].tools[0]  # kept, not evicted
        assert service.contexts[2].tools[0].name == "tool_0b"
        bad = {"message": "x", "tools": [*tools[:3], {"name": 5}]}
        problem = client.post("/v1/assemble", json=bad).json()
        again = client.post("/v1/assemble", json={"message": "x", "tools": tools, "role": "boss"})
    assert problem["status"] == 400 and "$.tools[3].name" in problem["detail"]
    assert again.status_code == 400 and "$.role" in again.json()["detail"]


def test_the_decoded_tools_kept_are_bounded(monkeypatch):
    import lamina.serve.tools_memo as tools_memo

    monkeypatch.setattr(tools_memo, "LISTS", 3)
    decoded = tools_memo.DecodedTools(dumps)
    first = decoded.structure({"message": "x", "tools": offered(2, "a")})
    for tag in "bcd":  # three more lists: the first is forgotten
        decoded.structure({"message": "x", "tools": offered(2, tag)})
    again = decoded.structure({"message": "x", "tools": offered(2, "a")})
    assert again.tools == first.tools and again.tools[0] is not first.tools[0]
    assert decoded.structure({"message": "x", "tools": offered(2, "a")}).tools[0] is again.tools[0]
    assert len(decoded._kept) == 3

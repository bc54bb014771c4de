"""The service's endpoints against the ASGI app (HTTP through httpx, no socket): the same
JSON as the command line, errors in one problem shape mapped from the kernel's taxonomy,
body limits, session labels, per-session ordering and an event loop that never waits on
assembly. Real sockets and processes are in test_serve_security.py and test_serve_ledger.py."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import defaultdict
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from starlette.testclient import TestClient

from lamina import (
    AgentResult,
    Block,
    CompactionOutcome,
    ConfigError,
    Message,
    SessionStats,
    SessionStore,
    hookimpl,
)
from lamina.adapters import CalibratedEstimate
from lamina.records import ModelInfo
from lamina.serde import to_json, unstructure
from lamina.serve.app import create_app
from lamina.serve.openapi import components
from lamina.serve.service import Service
from lamina.testing import StaticProvider, make_assembler

BASE = "http://127.0.0.1"
PROBLEM = "application/problem+json"


class MemoryStore:
    """A session store plugin keeping sessions in a dict (the contract, without a database)."""

    def __init__(self, *, fail: Exception | None = None, barrier: Any = None) -> None:
        self.sessions: dict[str, list[Message]] = defaultdict(list)
        self.fail = fail
        self.barrier = barrier
        self.active: dict[str, int] = defaultdict(int)
        self.most: dict[str, int] = defaultdict(int)
        self.lock = threading.Lock()

    def assemble(self, assembler: Any, request: Any) -> Any:
        from attrs import evolve

        history = tuple(self.sessions.get(request.session_label, ()))
        return assembler.assemble(evolve(request, history=history))

    def record(self, _assembler: Any, label: str, result: AgentResult) -> str:
        if self.fail is not None:
            raise self.fail
        with self.lock:
            self.active[label] += 1
            self.most[label] = max(self.most[label], self.active[label])
        try:
            if self.barrier is not None:
                self.barrier.wait()
            self.sessions[label].extend(result.messages)
        finally:
            with self.lock:
                self.active[label] -= 1
        return f"{label}:{len(self.sessions[label])}"

    def compact(self, _assembler: Any, request: Any, compaction: Any) -> CompactionOutcome:
        label = request.session_label
        if label not in self.sessions:
            raise LookupError(f"no session {label!r}")
        return CompactionOutcome(session_label=label, compacted=False, trigger=compaction.trigger)

    def stats(self, _assembler: Any, label: str) -> SessionStats:
        if label not in self.sessions:
            raise LookupError(f"no session {label!r}")
        return SessionStats(session_label=label, turns=len(self.sessions[label]) // 2)

    @hookimpl
    def lamina_session_stores(self) -> list[SessionStore]:
        return [
            SessionStore(
                name="memory",
                assemble=self.assemble,
                record=self.record,
                compact=self.compact,
                stats=self.stats,
            )
        ]


def service(config: dict[str, Any] | None = None, *plugins: tuple[str, object]) -> Service:
    return Service(make_assembler(config or {"model": "gpt-4o"}, plugins=list(plugins)))


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def client(store: MemoryStore):
    with TestClient(create_app(service(None, ("memory", store))), base_url=BASE) as c:
        yield c


def turn(text: str) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": text}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"re: {text}"}]},
        ],
        "usage": {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 2},
    }


def assert_problem(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["type"] == f"urn:lamina:problem:{kind}"
    assert body["title"] and body["detail"]
    return body


# -- the endpoints ---------------------------------------------------------------------------


def test_assemble_answers_the_same_json_as_the_command_line(client):
    message = "Compare staging with prod."
    response = client.post("/v1/assemble", json={"message": message, "session_label": "s-1"})
    assert response.status_code == 200
    a = make_assembler({"model": "gpt-4o"})
    expected = json.loads(to_json(a.assemble(a.request(message, session_label="s-1"))))
    got = response.json()
    for doc in (got, expected):
        doc["report"].pop("timings_ms")
    assert got == expected


def test_a_turn_recorded_is_the_next_assemblys_history(client, store):
    assert client.post("/v1/sessions/s-1/turns", json=turn("first")).status_code == 201
    reply = client.post("/v1/sessions/s-1/turns", json=turn("second")).json()
    assert reply == {"session_label": "s-1", "turn_id": "s-1:4"}
    ctx = client.post("/v1/assemble", json={"message": "third", "session_label": "s-1"}).json()
    assert [m["content"][0]["text"] for m in ctx["history"]] == [
        "first",
        "re: first",
        "second",
        "re: second",
    ]
    assert client.get("/v1/sessions/s-1/stats").json()["turns"] == 2


def test_a_request_with_its_own_history_bypasses_the_store(client, store):
    store.sessions["s-1"] = [Message.of("user", "stored")]
    history = [{"role": "user", "content": [{"type": "text", "text": "the host's"}]}]
    body = {"message": "next", "session_label": "s-1", "history": history}
    ctx = client.post("/v1/assemble", json=body).json()
    assert [m["content"][0]["text"] for m in ctx["history"]] == ["the host's"]
    assert ctx["report"]["history_source"] == "request"


def test_an_event_may_be_sent_whole(client):
    event = {"content": "deploy failed", "channel": "ops", "time": "2026-01-02T03:04:05+00:00"}
    ctx = client.post("/v1/assemble", json={"event": event}).json()
    assert "deploy failed" in ctx["current_message"]["content"][0]["text"]
    assert "2026-01-02T03:04:05" in ctx["current_message"]["content"][0]["text"]


def test_health_plugins_schema_and_openapi(client):
    health = client.get("/v1/health").json()
    assert health["status"] == "ok" and health["store"] == "memory" and health["model"] == "gpt-4o"
    names = [p["name"] for p in client.get("/v1/plugins").json()]
    assert "memory" in names and "history" in names
    schema = client.get("/v1/schema")
    assert schema.headers["content-type"] == "application/schema+json"
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    assert doc["components"]["schemas"] == components()
    assert set(doc["components"]["schemas"]) == set(schema.json()["$defs"])
    post = doc["paths"]["/v1/assemble"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AssemblyInput"
    }


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"message": "hi", "workspace_path": "/etc"}, "unknown keys ['workspace_path'] @ $"),
        ({"message": "hi", "max_tokens": "many"}, "@ $.max_tokens"),
        ({"message": "hi", "history": [{"role": "user", "content": [{"type": "x"}]}]}, "$.history"),
        ({"message": "hi", "role": "boss"}, "@ $.role"),
    ],
)
def test_a_malformed_request_is_a_400_naming_the_field(client, body, needle):
    problem = assert_problem(client.post("/v1/assemble", json=body), 400, "invalid-request")
    assert any(needle in e for e in problem["errors"]), problem


@pytest.mark.parametrize("body", [{}, {"message": "a", "event": {"content": "b"}}])
def test_message_or_event_exactly_one(client, body):
    problem = assert_problem(client.post("/v1/assemble", json=body), 400, "config")
    assert problem["key"] == "message"


def test_not_json_is_a_400_and_not_declared_json_a_415(client):
    headers = {"content-type": "application/json"}
    assert_problem(
        client.post("/v1/assemble", content=b"{nope", headers=headers), 400, "invalid-request"
    )
    assert_problem(
        client.post("/v1/assemble", content=b"\xff\xfe", headers=headers), 400, "invalid-request"
    )
    plain = client.post(
        "/v1/assemble", content=b'{"message": "hi"}', headers={"content-type": "text/plain"}
    )
    assert_problem(plain, 415, "http")


def test_an_unmeetable_budget_is_a_422_with_the_overage(client):
    body = {"message": "word " * 400, "max_tokens": 50}
    problem = assert_problem(client.post("/v1/assemble", json=body), 422, "budget")
    assert problem["overage"] > 0 and problem["available"] == 50


def test_a_failing_required_provider_is_a_500_naming_the_plugin():
    def boom(_ctx: Any) -> list[Block]:
        raise RuntimeError("disk on fire")

    broken = StaticProvider(boom, name="broken", required=True)
    with TestClient(create_app(service(None, ("broken", broken))), base_url=BASE) as c:
        problem = assert_problem(c.post("/v1/assemble", json={"message": "hi"}), 500, "provider")
    assert problem["plugin"] == "broken" and "disk on fire" in problem["detail"]
    assert "Traceback" not in problem["detail"]


def test_a_required_providers_config_error_names_the_plugin():
    def malformed(_ctx: Any) -> list[Block]:
        raise ConfigError("not valid YAML", file="rules.yml")

    broken = StaticProvider(malformed, name="rules", required=True)
    with TestClient(create_app(service(None, ("rules", broken))), base_url=BASE) as c:
        problem = assert_problem(c.post("/v1/assemble", json={"message": "hi"}), 400, "config")
    assert problem["plugin"] == "rules" and problem["file"] == "rules.yml"
    assert problem["detail"] == "plugin 'rules': rules.yml: not valid YAML"


def test_a_failing_store_is_a_500_naming_the_store_plugin():
    store = MemoryStore(fail=RuntimeError("ledger unplugged"))
    with TestClient(create_app(service(None, ("memory", store))), base_url=BASE) as c:
        response = c.post("/v1/sessions/s-1/turns", json=turn("x"))
    problem = assert_problem(response, 500, "plugin")
    assert problem["plugin"] == "memory" and "ledger unplugged" in problem["detail"]


def test_a_session_the_store_does_not_know_is_a_404(client):
    assert_problem(client.get("/v1/sessions/nobody/stats"), 404, "not-found")
    assert_problem(client.post("/v1/sessions/nobody/compact", json={}), 404, "not-found")


def test_without_a_store_recording_is_a_400_naming_the_config_key():
    with TestClient(create_app(service()), base_url=BASE) as c:
        problem = assert_problem(c.post("/v1/sessions/s-1/turns", json=turn("x")), 400, "config")
        assert c.get("/v1/health").json()["store"] is None
    assert problem["key"] == "plugins.ledger.database"


def test_unknown_routes_and_methods_are_problems_too(client):
    assert_problem(client.get("/v1/nothing"), 404, "http")
    assert_problem(client.get("/v1/assemble"), 405, "http")


# -- limits and labels -------------------------------------------------------------------------


def test_a_body_over_the_limit_is_a_413_whether_declared_or_streamed(store):
    app = create_app(service(None, ("memory", store)), max_body=2048)
    big = json.dumps({"message": "x" * 4096}).encode()
    with TestClient(app, base_url=BASE) as c:
        headers = {"content-type": "application/json"}
        assert_problem(c.post("/v1/assemble", content=big, headers=headers), 413, "too-large")
        chunks = (big[i : i + 512] for i in range(0, len(big), 512))  # no content-length
        assert_problem(c.post("/v1/assemble", content=chunks, headers=headers), 413, "too-large")
        small = json.dumps({"message": "x" * 100}).encode()
        assert c.post("/v1/assemble", content=small, headers=headers).status_code == 200


BAD_LABELS = ["a b", "-lead", ".hidden", "a..b", "x" * 129, "é", "a:b", "a\\b"]


@pytest.mark.parametrize("label", BAD_LABELS)
def test_unsafe_session_labels_are_refused_everywhere(client, store, label):
    quoted = "/v1/sessions/" + quote(label, safe="")
    for response in (
        client.post(f"{quoted}/turns", json=turn("x")),
        client.post(f"{quoted}/compact", json={}),
        client.get(f"{quoted}/stats"),
        client.post("/v1/assemble", json={"message": "hi", "session_label": label}),
    ):
        problem = assert_problem(response, 400, "config")
        assert problem["key"] in ("label", "session_label")
    assert not store.sessions


@pytest.mark.parametrize("label", ["a", "support-42", "Team_1.thread-7", "x" * 128])
def test_ordinary_labels_are_accepted(client, label):
    assert client.post(f"/v1/sessions/{label}/turns", json=turn("x")).status_code == 201


def test_a_slash_in_a_label_never_reaches_the_store(client, store):
    for path in ("/v1/sessions/a%2F..%2Fb/turns", "/v1/sessions/../x/turns"):
        assert client.post(path, json=turn("x")).status_code in (400, 404)
    assert not store.sessions


# -- concurrency -------------------------------------------------------------------------------


def test_one_sessions_requests_run_one_at_a_time_and_sessions_run_side_by_side():
    barrier = threading.Barrier(2, timeout=30)  # two sessions must be inside record at once
    store = MemoryStore(barrier=barrier)
    app = create_app(service(None, ("memory", store)))

    async def run() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            calls = [c.post(f"/v1/sessions/s{i % 2}/turns", json=turn(str(i))) for i in range(10)]
            return [r.status_code for r in await asyncio.gather(*calls)]

    assert asyncio.run(run()) == [201] * 10
    assert dict(store.most) == {"s0": 1, "s1": 1}
    assert len(store.sessions["s0"]) == len(store.sessions["s1"]) == 10


def test_the_event_loop_answers_while_an_assembly_waits():
    release = threading.Event()

    def slow(_ctx: Any) -> list[Block]:
        assert release.wait(timeout=30), "the event loop never answered the health check"
        return []

    slow_plugin = StaticProvider(slow, name="slow")
    app = create_app(service(None, ("slow", slow_plugin)))

    async def run() -> tuple[int, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            pending = asyncio.ensure_future(c.post("/v1/assemble", json={"message": "hi"}))
            health = await c.get("/v1/health")  # served while the assembly blocks its thread
            release.set()
            return health.status_code, (await pending).status_code

    assert asyncio.run(run()) == (200, 200)


# -- calibration -------------------------------------------------------------------------------


class Estimating:
    """A model whose tokenizer is a calibrated estimate (as for Claude)."""

    def __init__(self) -> None:
        self.tokenizer = CalibratedEstimate(chars_per_token=4.0, label="est")

    @hookimpl
    def lamina_model_info(self, model: str) -> ModelInfo | None:
        return ModelInfo(name=model, context_window=100_000) if model == "est-model" else None

    @hookimpl
    def lamina_tokenizer(self, model: str) -> Any:
        return self.tokenizer if model == "est-model" else None


def test_reported_usage_calibrates_an_estimating_tokenizer(store):
    est = Estimating()
    svc = service({"model": "est-model"}, ("est", est), ("memory", store))
    with TestClient(create_app(svc), base_url=BASE) as c:
        ctx = c.post("/v1/assemble", json={"message": "word " * 200, "session_label": "s"}).json()
        estimated = ctx["token_budget"]["used"]["total"]
        result = turn("x") | {"usage": {"input_tokens": 2 * estimated}}
        assert c.post("/v1/sessions/s/turns", json=result).status_code == 201
    assert est.tokenizer.factor > 1.2 and est.tokenizer.revision == 1


def test_the_wire_result_round_trips(client):
    result = AgentResult(messages=(Message.of("assistant", "ok"),), stop_reason="tool_use")
    data = unstructure(result)
    assert client.post("/v1/sessions/s-9/turns", json=data).status_code == 201

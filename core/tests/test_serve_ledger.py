"""``lamina serve`` with the ledger on SQLite, over real sockets: the agent loop a host runs
(assemble, the model's reply with a tool call and its result, record, again), proactive and
manual compaction, statistics from the provider's usage, many sessions recorded at once with
nothing lost, and a clean shutdown that keeps every acknowledged turn."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("lamina_ledger")


def config_file(tmp_path: Path, **ledger: Any) -> str:
    extra = "".join(f"{k} = {v!r}\n" for k, v in ledger.items())
    path = tmp_path / "lamina.toml"
    path.write_text(
        'model = "gpt-4o"\n'
        "[budget]\nreserve_response = 0\nreserve_tools = 0\n"
        f'[plugins.ledger]\ndatabase = "ledger.db"\n{extra}',
        encoding="utf-8",
    )
    return str(path)


@contextmanager
def serving(config: str) -> Iterator[tuple[httpx.Client, subprocess.Popen[str]]]:
    """A ``lamina serve`` process (the ledger its only installed plugin) and a client for it."""
    env = {**os.environ, "LAMINA_PLUGINS": "ledger"}
    env.pop("LAMINA_SERVE_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lamina", "serve", "--config", config, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            ready = sel.select(timeout=60)
        line = proc.stdout.readline() if ready else ""
        if "serving on" not in line:
            proc.kill()
            pytest.fail(f"lamina serve did not start: {line!r} {proc.communicate(timeout=30)[1]}")
        with httpx.Client(base_url=line.strip().rsplit(" ", 1)[1], timeout=60) as client:
            yield client, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def text(role: str, value: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": value}]}


def reply(ctx: dict[str, Any], n: int, size: int = 1) -> dict[str, Any]:
    """The scripted model's turn: a tool call, its result, an answer, and the usage."""
    call = {"type": "tool_call", "id": f"call-{n}", "name": "read_file", "arguments": {"n": n}}
    result = {"type": "tool_result", "call_id": f"call-{n}", "content": f"file {n} " * size}
    used = ctx["token_budget"]["used"]["total"]
    return {
        "messages": [
            ctx["current_message"],
            {"role": "assistant", "content": [call]},
            {"role": "tool", "content": [result]},
            text("assistant", f"answer {n}"),
        ],
        "usage": {"input_tokens": used, "cached_input_tokens": used // 2, "output_tokens": 9},
        "stop_reason": "end_turn",
    }


def test_ten_turns_of_an_agent_loop(tmp_path):
    with serving(config_file(tmp_path)) as (client, _proc):
        sizes = []
        for n in range(10):
            ctx = client.post(
                "/v1/assemble", json={"message": f"question {n}", "session_label": "loop"}
            )
            assert ctx.status_code == 200, ctx.text
            ctx = ctx.json()
            sizes.append(len(ctx["history"]))
            recorded = client.post("/v1/sessions/loop/turns", json=reply(ctx, n))
            assert recorded.status_code == 201, recorded.text
        stats = client.get("/v1/sessions/loop/stats").json()
        last = client.post(
            "/v1/assemble", json={"message": "done?", "session_label": "loop"}
        ).json()
    assert sizes == [4 * n for n in range(10)]
    calls = [p for m in last["history"] for p in m["content"] if p["type"] == "tool_call"]
    results = [p for m in last["history"] for p in m["content"] if p["type"] == "tool_result"]
    assert (
        [c["id"] for c in calls]
        == [r["call_id"] for r in results]
        == [f"call-{n}" for n in range(10)]
    )
    assert stats["turns"] == 10 and stats["turns_with_usage"] == 10
    assert (
        stats["cached_input_tokens"] * 2
        <= stats["input_tokens"]
        <= 2 * stats["cached_input_tokens"] + 10
    )
    assert 0.45 < stats["cache_hit_ratio"] <= 0.5


def test_a_session_that_outgrows_its_budget_is_compacted_before_it_is_assembled(tmp_path):
    with serving(config_file(tmp_path, minimum_turns=2)) as (client, _proc):
        for n in range(12):
            body = {"message": f"question {n}", "session_label": "long", "max_tokens": 1500}
            ctx = client.post("/v1/assemble", json=body)
            assert ctx.status_code == 200, ctx.text
            assert ctx.json()["token_budget"]["used"]["total"] <= 1500
            client.post("/v1/sessions/long/turns", json=reply(ctx.json(), n, size=40))
        stats = client.get("/v1/sessions/long/stats").json()
    assert stats["compactions"] >= 1 and stats["turns"] == 12


def test_manual_compaction_through_the_service(tmp_path):
    with serving(config_file(tmp_path, minimum_turns=2)) as (client, _proc):
        for n in range(6):
            ctx = client.post(
                "/v1/assemble", json={"message": f"q{n}", "session_label": "m"}
            ).json()
            client.post("/v1/sessions/m/turns", json=reply(ctx, n, size=30))
        body = {"target": 0.1, "instructions": "keep the file names", "max_tokens": 4000}
        done = client.post("/v1/sessions/m/compact", json=body)
        assert done.status_code == 200, done.text
        outcome = done.json()
        after = client.post("/v1/assemble", json={"message": "next", "session_label": "m"}).json()
        stats = client.get("/v1/sessions/m/stats").json()
    assert outcome["compacted"] and outcome["summarized_turns"] >= 1
    assert outcome["kept_turns"] == 6 - outcome["summarized_turns"]
    assert outcome["tokens_after"] < outcome["tokens_before"]
    assert any("takes no instructions" in w for w in outcome["warnings"])
    assert stats["compactions"] == 1
    assert len(after["history"]) < 4 * 6


def test_an_unknown_session_is_a_404_and_a_bad_turn_a_400(tmp_path):
    with serving(config_file(tmp_path)) as (client, _proc):
        missing = client.get("/v1/sessions/nobody/stats")
        orphan = {
            "messages": [
                {
                    "role": "tool",
                    "content": [{"type": "tool_result", "call_id": "x", "content": "?"}],
                }
            ]
        }
        bad = client.post("/v1/sessions/s/turns", json=orphan)
    assert missing.status_code == 404 and missing.json()["type"] == "urn:lamina:problem:not-found"
    assert bad.status_code == 400 and bad.json()["key"] == "messages"
    assert "'x'" in bad.json()["detail"]


def test_many_sessions_recorded_at_once_lose_nothing(tmp_path):
    sessions, turns = 8, 6

    def loop(client: httpx.Client, label: str) -> list[int]:
        codes = []
        for n in range(turns):
            ctx = client.post(
                "/v1/assemble", json={"message": f"{label} {n}", "session_label": label}
            )
            codes.append(ctx.status_code)
            codes.append(
                client.post(f"/v1/sessions/{label}/turns", json=reply(ctx.json(), n)).status_code
            )
        return codes

    with serving(config_file(tmp_path)) as (client, _proc), ThreadPoolExecutor(sessions) as pool:
        labels = [f"s{i}" for i in range(sessions)]
        codes = [c for done in pool.map(lambda label: loop(client, label), labels) for c in done]
        counts = [client.get(f"/v1/sessions/{label}/stats").json()["turns"] for label in labels]
        # One session hit by several writers at once: its turns all land too.
        shared = [
            reply({"current_message": text("user", "x"), "token_budget": {"used": {"total": 1}}}, n)
            for n in range(12)
        ]
        posted = list(
            pool.map(lambda r: client.post("/v1/sessions/shared/turns", json=r).status_code, shared)
        )
        together = client.get("/v1/sessions/shared/stats").json()["turns"]
    assert set(codes) == {200, 201}
    assert counts == [turns] * sessions
    assert posted == [201] * 12 and together == 12


def test_a_clean_shutdown_keeps_every_acknowledged_turn(tmp_path):
    config = config_file(tmp_path)
    with serving(config) as (client, proc):
        for n in range(3):
            ctx = client.post(
                "/v1/assemble", json={"message": f"q{n}", "session_label": "kept"}
            ).json()
            assert client.post("/v1/sessions/kept/turns", json=reply(ctx, n)).status_code == 201
        proc.send_signal(signal.SIGTERM)  # uvicorn shuts down, then exits by the signal
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    with serving(config) as (client, _proc):
        assert client.get("/v1/sessions/kept/stats").json()["turns"] == 3

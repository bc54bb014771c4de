"""``lamina serve``'s pages, from a real process over a socket with the ledger on SQLite: the
assembly report as HTML (``POST /v1/assemble?format=html``), a session's statistics turn by
turn (``GET /v1/sessions/{label}/stats?per_turn=true``, the same JSON as ``lamina ledger
stats --per-turn --json``) and as a page (``?format=html``), with the figures of the JSON."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from lamina.testing.browser import Node, parse

pytest.importorskip("lamina_ledger")

TIME = "2026-03-01T09:00:00+00:00"
TOOL = {"name": "read_file", "description": "Read a file of the workspace."}


@contextmanager
def serving(tmp_path: Path) -> Iterator[httpx.Client]:
    """A ``lamina serve`` process (the ledger its only plugin) and a client for it."""
    (tmp_path / "lamina.toml").write_text(
        'model = "gpt-4o"\n[budget]\nreserve_response = 0\nreserve_tools = 0\n'
        '[[blocks]]\nid = "rules"\ntext = "Answer briefly and cite the file you read."\n'
        '[plugins.ledger]\ndatabase = "ledger.db"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "LAMINA_PLUGINS": "ledger"}
    env.pop("LAMINA_SERVE_TOKEN", None)
    cmd = [sys.executable, "-m", "lamina", "serve", "--config", "lamina.toml", "--port", "0"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
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
            yield client
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def result(ctx: dict[str, Any], n: int) -> dict[str, Any]:
    used = ctx["token_budget"]["used"]["total"]
    prefix = ctx["report"]["stable_prefix"]["tokens"]
    return {
        "messages": [
            ctx["current_message"],
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]},
        ],
        "usage": {
            "input_tokens": used,
            "cached_input_tokens": prefix if n else 0,
            "cache_creation_tokens": 0 if n else prefix,
            "output_tokens": 20 + n,
        },
        "stop_reason": "max_tokens" if n == 2 else "end_turn",
        "error": "cut short" if n == 2 else None,
    }


def html_of(reply: httpx.Response) -> Node:
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    assert reply.headers["content-security-policy"].startswith("default-src 'none'")
    return parse(reply.text)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Four turns through the service (tools offered from the third on, which breaks the
    cache), each assembled as JSON and as a page; then the statistics both ways."""
    folder = tmp_path_factory.mktemp("serve")
    out: dict[str, Any] = {"contexts": [], "pages": []}
    with serving(folder) as client:
        for n in range(4):
            body: dict[str, Any] = {
                "event": {"content": f"question {n}", "time": TIME},
                "session_label": "pages",
            }
            if n >= 2:
                body["tools"] = [TOOL]
            ctx = client.post("/v1/assemble", json=body)
            assert ctx.status_code == 200, ctx.text
            out["contexts"].append(ctx.json())
            out["pages"].append(html_of(client.post("/v1/assemble?format=html", json=body)))
            recorded = client.post("/v1/sessions/pages/turns", json=result(ctx.json(), n))
            assert recorded.status_code == 201, recorded.text
        per_turn = client.get("/v1/sessions/pages/stats", params={"per_turn": "true"})
        assert per_turn.status_code == 200, per_turn.text
        out["per_turn"] = per_turn.json()
        out["totals"] = client.get("/v1/sessions/pages/stats").json()
        out["stats_page"] = html_of(client.get("/v1/sessions/pages/stats?format=html"))
        out["bad_format"] = client.get("/v1/sessions/pages/stats?format=pdf")
        out["bad_flag"] = client.get("/v1/sessions/pages/stats?per_turn=maybe")
        out["unknown"] = client.get("/v1/sessions/nobody/stats?format=html")
        out["unknown_turns"] = client.get("/v1/sessions/nobody/stats?per_turn=1")
    out["folder"] = folder
    return out


def test_the_assembly_page_has_the_contexts_figures(served: dict[str, Any]) -> None:
    for ctx, root in zip(served["contexts"], served["pages"], strict=True):
        main = root.by_id("report")
        budget = ctx["token_budget"]
        assert int(main.attrs["data-used"]) == budget["used"]["total"]
        assert int(main.attrs["data-available"]) == budget["available"]
        prefix = root.by_id("stable-prefix")
        stable = ctx["report"]["stable_prefix"]
        assert (int(prefix.attrs["data-tokens"]), prefix.attrs["data-sha256"]) == (
            stable["tokens"],
            stable["sha256"],
        )
        blocks = {n.attrs["data-block"] for n in root.by_id("blocks").select(tag="tr")[1:]}
        assert blocks == {b["id"] for b in ctx["report"]["blocks"]}


def test_per_turn_statistics_record_each_turns_prefix_usage_cost_and_stop(
    served: dict[str, Any],
) -> None:
    data = served["per_turn"]
    turns = data["turns"]
    assert [t["number"] for t in turns] == [1, 2, 3, 4]
    for turn, ctx in zip(turns, served["contexts"], strict=True):
        stable = ctx["report"]["stable_prefix"]
        assert (turn["prefix_sha256"], turn["prefix_tokens"]) == (
            stable["sha256"],
            stable["tokens"],
        )
        assert turn["cost"] > 0 and turn["input_tokens"] == ctx["token_budget"]["used"]["total"]
    assert [t["cache_bust"] for t in turns] == [
        None,
        None,
        {"block": "(tools)", "change": "added"},
        None,
    ]
    assert (turns[2]["stop_reason"], turns[2]["error"]) == ("max_tokens", "cut short")
    totals = served["totals"]
    assert totals["turns"] == data["totals"]["turns"] == 4
    assert totals["details"]["cache_busts"] == data["totals"]["cache_busts"] == 1
    assert totals["details"]["cost"] == pytest.approx(data["totals"]["cost"])


def test_the_served_json_is_what_the_cli_prints(served: dict[str, Any]) -> None:
    env = {**os.environ, "LAMINA_PLUGINS": "ledger"}
    cmd = [sys.executable, "-m", "lamina", "ledger", "stats", "pages", "--per-turn", "--json"]
    proc = subprocess.run(
        [*cmd, "-d", "ledger.db"],
        capture_output=True,
        text=True,
        env=env,
        cwd=served["folder"],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == served["per_turn"]


def test_the_stats_page_has_the_jsons_figures(served: dict[str, Any]) -> None:
    root, data = served["stats_page"], served["per_turn"]
    main = root.by_id("stats")
    t = data["totals"]
    assert int(main.attrs["data-input-tokens"]) == t["input_tokens"]
    assert int(main.attrs["data-cache-busts"]) == t["cache_busts"] == 1
    assert float(main.attrs["data-cost"]) == t["cost"]
    rows = [r for r in root.by_id("turns").select(tag="tr") if "data-turn" in r.attrs]
    assert [r.attrs["data-prefix-sha256"] for r in rows] == [
        x["prefix_sha256"] for x in data["turns"]
    ]
    marks = root.by_id("chart-tokens").select("bust-mark")
    assert [(g.attrs["data-number"], g.attrs["data-block"]) for g in marks] == [("3", "(tools)")]


def test_bad_parameters_and_unknown_sessions_are_problems(served: dict[str, Any]) -> None:
    for reply, key in ((served["bad_format"], "format"), (served["bad_flag"], "per_turn")):
        assert reply.status_code == 400
        assert reply.headers["content-type"] == "application/problem+json"
        assert reply.json()["key"] == key
    for reply in (served["unknown"], served["unknown_turns"]):
        assert reply.status_code == 404 and reply.json()["type"].endswith("not-found")

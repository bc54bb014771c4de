"""Many writers end to end: several real ``lamina serve`` processes on one ledger (a PostgreSQL
schema, or one SQLite file) run agent loops on the same session at once, on a budget that makes
each compact before assembling, while one of them is also asked to compact it again and again.
Afterwards the ledger holds every acknowledged turn once, in each writer's order, nothing
unacknowledged, every acknowledged compaction (and only compactions made for a budget besides),
no acknowledged compaction cutting off more turns than it summarized, and no tool result
without its call in the session's ancestry (nor in the history read back, nor in the context
assembled from it)."""

from __future__ import annotations

import http.client
import json
import os
import selectors
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from lamina_ledger.ledger import Ledger

from lamina import Message, ToolCallPart, ToolResultPart

#: Client threads per process, and agent steps per thread (a step records one turn).
THREADS, STEPS = 2, 12
#: The agents' budget: small enough that the sessions' history outgrows it, so each process
#: also compacts before assembling (proactive compaction) while the others write and compact.
BUDGET = 1500
SESSION = "shared"
#: Turns the agents record between two of the compactor's compactions: enough for the history
#: to outgrow ``BUDGET`` again in between, so proactive compactions happen however the
#: processes are scheduled (a compactor looping flat out could keep the history under it).
PACE = 10


class Client:
    """JSON over one keep-alive connection to a ``lamina serve`` (one per thread)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None and parts.port is not None
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {} if data is None else {"Content-Type": "application/json"}
        self.conn.request(method, path, body=data, headers=headers)
        reply = self.conn.getresponse()
        return reply.status, json.loads(reply.read() or b"null")

    def close(self) -> None:
        self.conn.close()


def config_file(directory: Path, database: str) -> str:
    path = directory / "lamina.toml"
    path.write_text(
        'model = "gpt-4o"\n'
        "[budget]\nreserve_response = 0\nreserve_tools = 0\n"
        f"[plugins.ledger]\ndatabase = {json.dumps(database)}\n"
        "minimum_turns = 0\nbusy_timeout = 30\n",
        encoding="utf-8",
    )
    return str(path)


@contextmanager
def services(config: str, count: int) -> Iterator[list[str]]:
    """``count`` ``lamina serve`` processes on ``config`` (started at once, free ports);
    their base URLs. Each is stopped with SIGTERM and must exit without a traceback."""
    env = {**os.environ, "LAMINA_PLUGINS": "ledger"}
    env.pop("LAMINA_SERVE_TOKEN", None)
    command = [sys.executable, "-m", "lamina", "serve", "--config", config, "--port", "0"]
    with ExitStack() as stack:
        procs = []
        for _ in range(count):
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
            )
            stack.callback(stop, proc)
            procs.append(proc)
        yield [ready(proc) for proc in procs]


def ready(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        line = proc.stdout.readline() if sel.select(timeout=60) else ""
    if "serving on" not in line:
        proc.kill()
        pytest.fail(f"lamina serve did not start: {line!r} {proc.communicate(timeout=30)[1]}")
    return line.strip().rsplit(" ", 1)[1]


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
    _out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


def text(role: str, value: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": value}]}


def agent(url: str, name: str, landed: threading.Semaphore) -> list[tuple[str, str]]:
    """One host's agent loop on the shared session: assemble, then record the model's turn.

    Even steps record a whole exchange (the user's message, a tool call, its result, the
    answer); odd steps record the call alone and the next step starts with its result, so
    other writers' turns (and compactions) land between a call and its result. Returns the
    acknowledged ``(turn id, marker)`` pairs in the order acknowledged; ``landed`` is released
    once per acknowledged turn."""
    client, acked = Client(url), []
    pending: dict[str, Any] | None = None  # a tool result owed to the next step
    try:
        for n in range(STEPS):
            marker = f"{name} step {n}"
            status, ctx = client.call(
                "POST",
                "/v1/assemble",
                {"message": marker, "session_label": SESSION, "max_tokens": BUDGET},
            )
            assert status == 200, ctx
            assert ctx["token_budget"]["used"]["total"] <= BUDGET
            call_id = f"{name}-call-{n}"
            call = {"type": "tool_call", "id": call_id, "name": "read", "arguments": {"n": n}}
            messages = [] if pending is None else [{"role": "tool", "content": [pending]}]
            messages += [ctx["current_message"], {"role": "assistant", "content": [call]}]
            result = {"type": "tool_result", "call_id": call_id, "content": f"file {marker} " * 8}
            if n % 2 == 0 or n == STEPS - 1:
                messages += [{"role": "tool", "content": [result]}, text("assistant", "done")]
                pending = None
            else:
                pending = result
            used = ctx["token_budget"]["used"]["total"]
            turn = {
                "messages": messages,
                "usage": {"input_tokens": used, "cached_input_tokens": used // 2},
                "stop_reason": "tool_use" if pending else "end_turn",
            }
            status, done = client.call("POST", f"/v1/sessions/{SESSION}/turns", turn)
            assert status == 201, done
            acked.append((done["turn_id"], marker))
            landed.release()
    finally:
        client.close()
    return acked


def compactor(url: str, writing: threading.Event, landed: threading.Semaphore) -> dict[str, int]:
    """Compact the shared session again and again while the agents write, after every
    ``PACE`` turns they record; the compactions acknowledged, each with the number of turns it
    summarized."""
    client, made, tries = Client(url), {}, 0
    try:
        while writing.is_set() or (not made and tries < 3):  # retried if none made yet
            tries += 0 if writing.is_set() else 1
            waited = 0
            while waited < PACE and writing.is_set():  # PACE more turns, or the agents are done
                waited += landed.acquire(timeout=0.05)
            body = {"target": 0.2, "max_tokens": 3000, "trigger": "manual"}
            status, outcome = client.call("POST", f"/v1/sessions/{SESSION}/compact", body)
            if status == 404:  # no agent has created the session yet
                continue
            assert status == 200, outcome
            if outcome["compacted"]:
                made[outcome["turn_id"]] = outcome["summarized_turns"]
    finally:
        client.close()
    return made


def run_hosts(urls: list[str]) -> tuple[list[list[tuple[str, str]]], dict[str, int]]:
    """Every process gets ``THREADS`` agents; the first also compacts while they write."""
    writing, landed = threading.Event(), threading.Semaphore(0)
    writing.set()
    with ThreadPoolExecutor(len(urls) * THREADS + 1) as pool:
        agents = [
            pool.submit(agent, url, f"p{p}t{t}", landed)
            for p, url in enumerate(urls)
            for t in range(THREADS)
        ]
        compactions = pool.submit(compactor, urls[0], writing, landed)
        try:
            acked = [a.result(timeout=120) for a in agents]
        finally:
            writing.clear()
        return acked, compactions.result(timeout=120)


def calls_and_results(messages: list[Message]) -> Iterator[tuple[str, str]]:
    """``("call", id)`` and ``("result", call id)`` in the order the messages hold them."""
    for m in messages:
        for p in m.content:
            if isinstance(p, ToolCallPart):
                yield "call", p.id
            elif isinstance(p, ToolResultPart):
                yield "result", p.call_id


def orphans(messages: list[Message]) -> list[str]:
    """Tool results whose call does not come before them."""
    seen: set[str] = set()
    found = []
    for kind, ident in calls_and_results(messages):
        if kind == "call":
            seen.add(ident)
        elif ident not in seen:
            found.append(ident)
    return found


def check_ledger(
    target: str, acked: list[list[tuple[str, str]]], compactions: dict[str, int]
) -> None:
    with Ledger.open(target, readonly=True) as ledger:
        ancestry = ledger.ancestry(SESSION)
        turns = {t: ledger.turn(t, session=SESSION) for t in ancestry}
        normal = [t for t in ancestry if turns[t].type == "normal"]
        everyone = [turn for ids in acked for turn, _ in ids]
        # every acknowledged turn is in the ancestry once, and nothing else is
        assert len(set(everyone)) == len(everyone)
        assert sorted(normal) == sorted(everyone)
        # each writer's turns in the order they were acknowledged
        for ids in acked:
            mine = {turn for turn, _ in ids}
            assert [t for t in normal if t in mine] == [turn for turn, _ in ids]
        # each turn holds what its writer sent, and only that
        for ids in acked:
            for turn, marker in ids:
                users = [m.text for m in turns[turn].messages if m.role == "user"]
                assert len(users) == 1 and users[0].endswith(f"\n{marker}"), users
        markers = [m.text for t in normal for m in turns[t].messages if m.role == "user"]
        assert len(markers) == len(set(markers))
        # every acknowledged compaction on the ancestry; the others (there are some) are those
        # the processes made before assembling
        assert compactions, "the compactor found something to compact"
        made = [t for t in ancestry if turns[t].type == "compaction"]
        assert set(compactions) <= set(made)
        own = [ledger.compaction(t, session=SESSION) for t in made if t not in compactions]
        assert {c.trigger for c in own} == {"context_limit"}
        # a compaction stands for no turn its summary did not see: the turns it newly cuts
        # off (from the previous cut to its first kept turn) are at most those it summarized
        cut = 0
        for at, turn in enumerate(ancestry):
            if turns[turn].type == "compaction":
                first = ledger.compaction(turn, session=SESSION).first_kept_turn_id
                new_cut = ancestry.index(first) if first is not None else at
                cut_off = [t for t in ancestry[cut:new_cut] if turns[t].type == "normal"]
                assert len(cut_off) <= compactions.get(turn, len(cut_off))
                cut = max(cut, new_cut)
        # no tool result without its call in the session's ancestry...
        oldest_first = [m for t in normal for m in turns[t].messages]  # ancestry: oldest first
        assert not orphans(oldest_first)
        results = [i for kind, i in calls_and_results(oldest_first) if kind == "result"]
        assert len(results) == len(set(results)) == len(everyone)
        # ...nor in the history read back after the last compaction
        history = ledger.history(SESSION)
        assert history.compaction is not None
        assert not orphans([m for t in history.turns for m in t.messages])
        # the history holds every turn from the last compaction's first kept one to the head
        # (and before it only the turns that hold the calls of kept tool results)
        first = history.compaction.first_kept_turn_id
        cut = ancestry.index(first if first is not None else history.compaction.turn_id)
        kept = [t for t in ancestry[cut:] if turns[t].type == "normal"]
        read = [t.id for t in history.turns]
        assert read[len(read) - len(kept) :] == kept
        assert read == normal[normal.index(read[0]) :] if read else not kept


def test_many_services_on_one_ledger_lose_duplicate_and_orphan_nothing(
    target: str, tmp_path: Path
) -> None:
    processes = 3
    with services(config_file(tmp_path, target), processes) as urls:
        acked, compactions = run_hosts(urls)
        # a fresh assembly through another process sees a context without orphans
        client = Client(urls[-1])
        status, ctx = client.call(
            "POST", "/v1/assemble", {"message": "and now?", "session_label": SESSION}
        )
        client.close()
    assert status == 200, ctx
    seen: set[str] = set()
    for m in ctx["history"]:
        for p in m["content"]:
            if p["type"] == "tool_call":
                seen.add(p["id"])
            elif p["type"] == "tool_result":
                assert p["call_id"] in seen, p
    assert [len(ids) for ids in acked] == [STEPS] * processes * THREADS
    check_ledger(target, acked, compactions)

"""``lamina serve`` vs in-process: a many-session agent loop through the service on loopback
and through the same Assembler and session store in the process, side by side, in one run.

Each turn of each session is one assemble and one record, as a host runs them: the current
message, a tool call, its result (whole lines of the Python standard library's own source,
sizes from a seeded RNG) and an answer, with the usage the provider would report. Both sides
use ``gpt-4o`` (o200k_base, Lamina's offline copy) and the ledger on SQLite, each its own
file in a temp dir.

* In-process: ``Assembler.from_config`` and the ``ledger`` session store from its registry,
  ``store.assemble(assembler, request)`` and ``store.record(assembler, label, result)``:
  what a Python host calls.
* Service: ``lamina serve --port 0`` in its own process (uvicorn, one worker), driven over
  one keep-alive HTTP/1.1 connection (``http.client``, ``TCP_NODELAY`` as HTTP clients set
  it); each timing includes encoding the request body and decoding the reply, as a host must,
  with ``--client-json`` (``orjson``, the default, as a host that cares would, or the
  standard library's ``json``, whose decoder takes ~0.7 ms for a 60 kB context).

Latency phase: rounds of every session's next turn, the two sides interleaved step by step
(the same turn of the same session on each, one after the other), so background load hits
both alike. Reports p50/p99 per request kind and the service's overhead at p50, and the assembly p50 of
both sides by the size of the context (the two sides assemble the same contexts), with how
long the host took to decode the service's reply (part of the service's time).
Throughput phase: ``--clients`` threads, each driving its own sessions, on each side in turn;
reports turns/s.

``--tools N``: the host offers the same N tools with every request (a description and six
string arguments each; in-process, ``Tool`` objects made once).

Run: ``.venv/bin/python bench/bench_serve.py [--sessions 16] [--turns 20] [--clients 4]
[--tools 0]``
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import selectors
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lamina import (
    AgentResult,
    Assembler,
    Message,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from lamina.serde import structure
from lamina.serve.service import pick_store

SEED = 20261123
MODEL = "gpt-4o"


# -- data ------------------------------------------------------------------------------------


def stdlib_lines() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    for path in sorted(root.glob("*.py"))[:40]:
        lines += path.read_text("utf-8", errors="replace").splitlines(keepends=True)
    return lines


class Script:
    """The scripted agent: each (session, turn) gets the same question, tool output and
    answer on both sides."""

    def __init__(self, seed: int = SEED) -> None:
        self.lines = stdlib_lines()
        self.rng = random.Random(seed)
        self.cache: dict[tuple[int, int], tuple[str, str, str]] = {}

    def turn(self, session: int, n: int) -> tuple[str, str, str]:
        key = (session, n)
        if key not in self.cache:
            start = self.rng.randrange(len(self.lines) - 80)
            output = "".join(self.lines[start : start + self.rng.randint(20, 60)])
            self.cache[key] = (
                f"Session {session}, step {n}: read the next file and tell me what it does.",
                output,
                f"Step {n}: the file defines helpers; nothing needs to change yet.",
            )
        return self.cache[key]


def result_messages(current: Any, session: int, n: int, script: Script) -> list[Message]:
    _question, output, answer = script.turn(session, n)
    call = ToolCallPart(id=f"c{session}-{n}", name="read_file", arguments={"step": n})
    return [
        current,
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(ToolResultPart(call_id=call.id, content=output),)),
        Message(role="assistant", content=(TextPart(text=answer),)),
    ]


# -- the two sides ---------------------------------------------------------------------------


def tool_specs(n: int) -> list[dict[str, Any]]:
    """``n`` tools as a host sends them (``--tools``): a description and six string
    arguments each."""
    arguments = {
        f"arg{j}": {"type": "string", "description": f"the {j}th argument of the call"}
        for j in range(6)
    }
    return [
        {
            "name": f"tool_{i}",
            "description": f"Does the {i}th thing the agent may need, carefully and once.",
            "input_schema": {"type": "object", "properties": arguments},
        }
        for i in range(n)
    ]


def write_config(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lamina.toml"
    path.write_text(
        f'model = "{MODEL}"\n[plugins.ledger]\ndatabase = "ledger.db"\n', encoding="utf-8"
    )
    return path


class InProcess:
    """The same calls a Python host makes: the assembler and the ledger store, no HTTP."""

    def __init__(self, config: Path, script: Script, tools: int = 0) -> None:
        self.assembler = Assembler.from_config(config)
        self.tools = tuple(
            structure(t, Tool) for t in tool_specs(tools)
        )  # made once, as a host does
        found = pick_store(self.assembler, "ledger")
        assert found is not None, "the ledger plugin is not installed"
        self.store = found.record
        self.script = script
        self.used: dict[str, int] = {}

    def assemble(self, session: int, n: int) -> Any:
        label = f"s{session}"
        question = self.script.turn(session, n)[0]
        request = self.assembler.request(question, session_label=label, tools=self.tools)
        return self.store.assemble(self.assembler, request)

    def record(self, session: int, n: int, ctx: Any) -> None:
        label = f"s{session}"
        total = ctx.token_budget.used.total
        usage = Usage(
            input_tokens=total, cached_input_tokens=self.used.get(label, 0), output_tokens=40
        )
        self.used[label] = total
        messages = result_messages(ctx.current_message, session, n, self.script)
        self.store.record(self.assembler, label, AgentResult(messages=tuple(messages), usage=usage))

    def close(self) -> None:
        if self.store.close is not None:
            self.store.close(self.assembler)
        self.assembler.close()


class Service:
    """``lamina serve`` in its own process, over keep-alive HTTP connections (one per thread)."""

    def __init__(
        self, config: Path, script: Script, decode: Callable[[bytes], Any], tools: int = 0
    ) -> None:
        self.decode = decode
        self.tools = tool_specs(tools)
        env = {**os.environ, "LAMINA_PLUGINS": "ledger"}
        env.pop("LAMINA_SERVE_TOKEN", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lamina", "serve", "--config", str(config), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            sel.select(timeout=120)
        line = self.proc.stdout.readline()
        if "serving on" not in line:
            self.proc.kill()
            _out, err = self.proc.communicate(timeout=30)
            raise SystemExit(f"lamina serve did not start: {line!r} {err}")
        self.port = int(line.strip().rsplit(":", 1)[1])
        self.script = script
        self.local = threading.local()
        self.size = 0  # bytes of the last reply
        self.decoding = 0.0  # ms the last reply took to decode
        self.used: dict[str, int] = {}
        #: The largest context the service sent (bytes of JSON, and its tokens).
        self.largest = (0, 0)

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port)
            conn.connect()  # no Nagle: http.client sends headers and body apart
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def call(self, method: str, path: str, body: Any = None) -> Any:
        conn = self._conn()
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        self.size = len(payload)
        if response.status >= 300:
            raise SystemExit(f"{method} {path}: {response.status} {payload[:300]!r}")
        decoded, self.decoding = timed(lambda: self.decode(payload))
        return decoded

    def assemble(self, session: int, n: int) -> Any:
        question = self.script.turn(session, n)[0]
        body: dict[str, Any] = {"message": question, "session_label": f"s{session}"}
        if self.tools:
            body["tools"] = self.tools
        ctx = self.call("POST", "/v1/assemble", body)
        self.largest = max(self.largest, (self.size, ctx["token_budget"]["used"]["total"]))
        return ctx

    def record(self, session: int, n: int, ctx: Any) -> None:
        label = f"s{session}"
        total = ctx["token_budget"]["used"]["total"]
        usage = {
            "input_tokens": total,
            "cached_input_tokens": self.used.get(label, 0),
            "output_tokens": 40,
        }
        self.used[label] = total
        _question, output, answer = self.script.turn(session, n)
        call = {
            "type": "tool_call",
            "id": f"c{session}-{n}",
            "name": "read_file",
            "arguments": {"step": n},
        }
        messages = [
            ctx["current_message"],
            {"role": "assistant", "content": [call]},
            {
                "role": "tool",
                "content": [{"type": "tool_result", "call_id": call["id"], "content": output}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": answer}]},
        ]
        self.call("POST", f"/v1/sessions/{label}/turns", {"messages": messages, "usage": usage})

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


Side = InProcess | Service


# -- measuring -------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, 1000 * (time.perf_counter() - started)


def context_tokens(ctx: Any) -> int:
    """The assembled context's tokens (an ``AssembledContext``, or its JSON)."""
    if isinstance(ctx, dict):
        return int(ctx["token_budget"]["used"]["total"])
    return int(ctx.token_budget.used.total)


def step(side: Side, session: int, n: int, samples: dict[str, list[float]]) -> None:
    ctx, t_assemble = timed(lambda: side.assemble(session, n))
    decoding = side.decoding if isinstance(side, Service) else 0.0
    _, t_record = timed(lambda: side.record(session, n, ctx))
    samples["assemble"].append(t_assemble)
    samples.setdefault("decode", []).append(decoding)
    samples["record"].append(t_record)
    samples.setdefault("tokens", []).append(context_tokens(ctx))


def latency(
    sides: dict[str, Side], sessions: int, turns: int, warmup: int
) -> dict[str, dict[str, list[float]]]:
    samples: dict[str, dict[str, list[float]]] = {
        name: {"assemble": [], "record": [], "tokens": [], "decode": []} for name in sides
    }
    for n in range(turns):
        for s in range(sessions):
            for name, side in sides.items():
                if n < warmup:
                    step(side, s, n, {"assemble": [], "record": []})
                else:
                    step(side, s, n, samples[name])
    return samples


def throughput(side: Side, sessions: range, turns: range, clients: int) -> float:
    """Turns per second with ``clients`` threads, each looping over its own sessions."""
    groups = [list(sessions)[i::clients] for i in range(clients)]

    def run(group: list[int]) -> None:
        for n in turns:
            for s in group:
                step(side, s, n, {"assemble": [], "record": []})

    threads = [threading.Thread(target=run, args=(g,)) for g in groups]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(sessions) * len(turns) / (time.perf_counter() - started)


def decoder(name: str) -> Callable[[bytes], Any]:
    if name == "orjson":
        import orjson

        return orjson.loads
    return json.loads


def by_size(samples: dict[str, dict[str, list[float]]], width: int) -> None:
    """Assembly p50 on each side and the overhead, per size of the context the in-process side
    assembled (the samples are paired: the same turn of the same session on both sides)."""
    inproc, service = samples["in-process"], samples["service"]
    buckets: dict[int, list[int]] = {}
    for i, tokens in enumerate(inproc["tokens"]):
        buckets.setdefault(int(tokens) // width, []).append(i)
    print(
        f"{'context tokens':<16} {'n':>4} {'in-process':>11} {'service':>8} {'overhead':>9} "
        f"{'decoding':>9}"
    )
    for b in sorted(buckets):
        rows = buckets[b]
        mine = statistics.median(inproc["assemble"][i] for i in rows)
        theirs = statistics.median(service["assemble"][i] for i in rows)
        decoding = statistics.median(service["decode"][i] for i in rows)
        span = f"{b * width // 1000}k-{(b + 1) * width // 1000}k"
        print(
            f"{span:<16} {len(rows):>4} {mine:11.2f} {theirs:8.2f} {theirs - mine:+9.2f} "
            f"{decoding:9.2f}"
        )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2, help="turns per session not timed")
    parser.add_argument("--clients", type=int, default=4, help="threads in the throughput phase")
    parser.add_argument(
        "--bucket", type=int, default=10_000, help="context tokens per row of the by-size table"
    )
    parser.add_argument(
        "--client-json", choices=["orjson", "json"], default="orjson", help="the host's decoder"
    )
    parser.add_argument(
        "--tools", type=int, default=0, help="tools the host offers with every request"
    )
    args = parser.parse_args()
    script = Script()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sides: dict[str, Side] = {
            "in-process": InProcess(write_config(root / "inproc"), script, args.tools),
            "service": Service(
                write_config(root / "serve"), script, decoder(args.client_json), args.tools
            ),
        }
        try:
            samples = latency(sides, args.sessions, args.turns, args.warmup)
            service = sides["service"]
            assert isinstance(service, Service)
            floor = [timed(lambda: service.call("GET", "/v1/health"))[1] for _ in range(200)]
            largest = service.largest
            rate = {
                name: throughput(
                    side,
                    range(args.sessions, 2 * args.sessions),
                    range(args.turns),
                    args.clients,
                )
                for name, side in sides.items()
            }
        finally:
            for side in sides.values():
                side.close()

    print(
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; {args.sessions} sessions x {args.turns} turns "
        f"({args.warmup} untimed), then {args.clients} clients on {args.sessions} more sessions; "
        f"the service's client decodes with {args.client_json}; {args.tools} tools offered "
        "with every request"
    )
    print(f"{'side':<11} {'request':<9} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
    for name in sides:
        for kind in ("assemble", "record"):
            values = samples[name][kind]
            print(
                f"{name:<11} {kind:<9} {pct(values, 0.5):8.2f} {pct(values, 0.99):8.2f} "
                f"{statistics.fmean(values):8.2f}"
            )
    print(f"service    health    {pct(floor, 0.5):8.2f} {pct(floor, 0.99):8.2f} (the HTTP floor)")
    size, tokens = largest
    print(f"largest context: {tokens} tokens, {size / 1024:.0f} kB of JSON")
    for kind in ("assemble", "record"):
        over = pct(samples["service"][kind], 0.5) - pct(samples["in-process"][kind], 0.5)
        print(f"service overhead at p50, {kind}: {over:+.2f} ms (goal: <= 2 ms)")
    decoding = pct(samples["service"]["decode"], 0.5)
    print(
        f"the host decoding the assembled context (part of the service's time): {decoding:.2f} ms p50"
    )
    print("assembly p50 (ms) by the size of the context (decoding: the service's reply's):")
    by_size(samples, args.bucket)
    for name in sides:
        sequential = len(samples[name]["assemble"]) / (
            sum(samples[name]["assemble"]) + sum(samples[name]["record"])
        )
        print(
            f"{name:<11} turns/s: {1000 * sequential:7.1f} sequential, "
            f"{rate[name]:7.1f} with {args.clients} clients"
        )


if __name__ == "__main__":
    main()

"""Many tools offered with every request: what a warm assembly costs with them, against the
same assembly without them, in one run.

A host offers the same ``Tool`` objects with every request (an agent's MCP servers can give it
hundreds). Each tool has a description and six string arguments. Timed: ``Assembler.assemble``
of a one-line message at a 128k budget, warm (after ``--warmup`` calls), ``gc.collect()``
before each call, with the tools and without them alternating; medians and their ratio. Two
ways of counting what the definitions cost: the kernel's (each tool's JSON) and the OpenAI
adapter's (the cookbook's ``num_tokens_for_tools``, ``lamina-openai``). There is no peer:
LangChain's ``trim_messages`` does not count tools.

Run: ``.venv/bin/python bench/bench_tools.py [--tools 300] [--requests 40]``
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import sys
import time
from collections.abc import Sequence

import lamina_openai

from lamina import Tool
from lamina.testing import make_assembler


def tools(n: int) -> tuple[Tool, ...]:
    arguments = {
        f"arg{j}": {"type": "string", "description": f"the {j}th argument of the call"}
        for j in range(6)
    }
    return tuple(
        Tool(
            name=f"tool_{i}",
            description=f"Does the {i}th thing the agent may need, carefully and once.",
            input_schema={"type": "object", "properties": arguments},
        )
        for i in range(n)
    )


def run(
    label: str,
    plugins: list[tuple[str, object]],
    offered: tuple[Tool, ...],
    args: argparse.Namespace,
) -> None:
    cfg = {"model": "gpt-4o", "budget": {"max_tokens": 128_000}}
    times: tuple[list[float], list[float]] = ([], [])
    with make_assembler(cfg, plugins=plugins) as a:
        for i in range(args.warmup):
            a.assemble(a.request(f"warm {i}", tools=offered))
            a.assemble(a.request(f"warm {i}"))
        for i in range(args.requests):
            for side in (0, 1) if i % 2 else (1, 0):
                request = a.request(f"question {i}", tools=offered if side == 0 else ())
                gc.collect()
                started = time.perf_counter()
                a.assemble(request)
                times[side].append(1000 * (time.perf_counter() - started))
    with_tools, without = (statistics.median(t) for t in times)
    print(
        f"  {label}: {with_tools:.2f} ms with the tools, {without:.2f} ms without, "
        f"{with_tools / without:.2f}x",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=300, help="tools offered")
    parser.add_argument("--requests", type=int, default=40, help="requests timed per side")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests first")
    args = parser.parse_args(argv)
    offered = tools(args.tools)
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print(
        f"Warm assembly with {args.tools} tools offered, against none (median ms per request, "
        f"{args.requests} requests, gc.collect() before each)"
    )
    run("the kernel's count", [], offered, args)
    run("the OpenAI adapter's count", [("openai", lamina_openai.plugin)], offered, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

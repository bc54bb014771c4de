"""Building the provider request, turn after turn: ``Assembler.payload`` with the OpenAI Chat
adapter against LangChain's ``convert_to_openai_messages``, in one run.

A host passes its own history (``request.history``), ``--messages`` messages of questions and
answers (every fifth answer a tool call with its result), and on each of ``--requests``
requests appends the last turn (a question and an answer) and asks for the next reply. Each
request is assembled (untimed; a 1M-token budget holds the whole conversation) and then its
provider request body is built, timed: Lamina's ``Assembler.payload(context, "openai")``
(messages, tools, limits, the prompt cache key) against the peer, LangChain's
``convert_to_openai_messages`` over the same conversation as LangChain messages, kept between
requests as a LangChain host keeps them. ``gc.collect()`` before each timed call, the two
alternating; medians and their ratio (Lamina / peer).

Run: ``.venv/bin/python bench/bench_payload.py [--messages 1000] [--requests 30]``
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time

from lamina_openai import plugin as openai_plugin
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)

from lamina import Message, TextPart, ToolCallPart, ToolResultPart
from lamina.testing import make_assembler


def turn(i: int) -> tuple[list[Message], list[BaseMessage]]:
    """Turn ``i`` in both forms: a question and an answer, or (every fifth) a question, a tool
    call, its result and an answer."""
    ask = f"Question {i}: what does the function on line {i} of the module return? " * 2
    answer = f"Answer {i}: it returns the parsed value, or None when the input is empty. " * 3
    ours = [Message.of("user", ask)]
    theirs: list[BaseMessage] = [HumanMessage(content=ask)]
    if i % 5 == 4:
        call = ToolCallPart(id=f"c{i}", name="read_file", arguments={"path": f"src/m{i}.py"})
        result = f"def f{i}(text):\n    return parse(text) if text else None\n"
        ours += [
            Message(role="assistant", content=(call,)),
            Message(role="tool", content=(ToolResultPart(call_id=f"c{i}", content=result),)),
        ]
        theirs += [
            AIMessage(
                content="",
                tool_calls=[{"name": "read_file", "args": call.arguments, "id": f"c{i}"}],
            ),
            ToolMessage(content=result, tool_call_id=f"c{i}"),
        ]
    ours.append(Message(role="assistant", content=(TextPart(text=answer),)))
    theirs.append(AIMessage(content=answer))
    return ours, theirs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages before timing")
    parser.add_argument("--requests", type=int, default=30, help="requests timed per side")
    args = parser.parse_args(argv)
    history: list[Message] = []
    peer: list[BaseMessage] = []
    i = 0
    while len(history) < args.messages:
        ours, theirs = turn(i)
        history += ours
        peer += theirs
        i += 1
    cfg = {
        "model": "gpt-4o",
        "session": "payload",
        "budget": {"max_tokens": 1_000_000, "context_window": 1_100_000, "reserve_tools": 0},
    }
    lamina_ms: list[float] = []
    peer_ms: list[float] = []
    with make_assembler(cfg, plugins=[("openai", openai_plugin)]) as a:
        for r in range(args.requests + 3):
            ours, theirs = turn(i + r)
            ask = ours[0].text
            context = a.assemble(a.request(ask, history=tuple(history)))
            sides = (
                lambda context=context: a.payload(context, "openai"),
                lambda ask=ask, kept=peer: convert_to_openai_messages(
                    [*kept, HumanMessage(content=ask)]
                ),
            )
            took = {}
            for side in (0, 1) if r % 2 else (1, 0):
                gc.collect()
                started = time.perf_counter()
                sides[side]()
                took[side] = 1000 * (time.perf_counter() - started)
            if r >= 3:  # (the first requests fill the memos)
                lamina_ms.append(took[0])
                peer_ms.append(took[1])
            history += ours
            peer += theirs
    ours_ms, theirs_ms = statistics.median(lamina_ms), statistics.median(peer_ms)
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        f"{args.messages:,} messages and growing, {args.requests} requests: Lamina payload "
        f"{ours_ms:.2f} ms, LangChain convert_to_openai_messages {theirs_ms:.2f} ms, "
        f"Lamina / peer {ours_ms / theirs_ms:.2f}x"
    )


if __name__ == "__main__":
    main()

"""Conversations for ``bench_cache.py``, built from the Python standard library's own source
(no network); the meter of cache hits, and the provider's count of a request.

Shapes (a seed picks the sizes and where in the standard library the text starts):

* ``review``: each turn a user ask, one ``read`` tool call, a large result (1,500–6,000
  characters) and a reply (the original benchmark's session);
* ``chat``: short chats, no tools: an ask of 40–400 characters and a reply of 150–1,500;
* ``tools``: tool-heavy: an ask, 2–6 calls (``read``, ``grep``, ``run``, ``list``), each
  answered with 100–800 or 800–4,000 characters, and a short reply;
* ``large``: as ``review``, but one turn in 12 reads 60,000–200,000 characters (about 15,000
  to 50,000 tokens: larger than a 32k budget);
* ``mixed``: 600 turns, each one of the above at random (chat 50%, review 30%, tools 15%,
  large 5%).
"""

from __future__ import annotations

import json
import random
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lamina import Message, TextPart, ToolCallPart, ToolResultPart

#: The providers' minimum cacheable prefix; the price of a cache write and a cache read.
MIN_PREFIX = 1024
WRITE, READ = 1.25, 0.10
TURNS = {"review": 300, "chat": 300, "tools": 300, "large": 300, "mixed": 600}


def stdlib_sources() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(root.glob("*.py")) + sorted(
        p for p in root.rglob("*.py") if p.parent != root and "site-packages" not in p.parts
    )


class Source:
    """Consecutive runs of whole lines of stdlib source, in file order from file ``start``
    (going round when it reaches the end)."""

    def __init__(self, start: int = 0) -> None:
        files = stdlib_sources()
        self.files = iter(files[start:] + files[:start] + files)
        self.lines: list[str] = []
        self.path = ""
        self.root = Path(sysconfig.get_paths()["stdlib"])

    def take(self, chars: int) -> str:
        chunk, size = [], 0
        while size < chars:
            if not self.lines:
                p = next(self.files)
                self.path = str(p.relative_to(self.root))
                self.lines = p.read_text("utf-8", errors="replace").splitlines(keepends=True)
                self.lines.reverse()
                continue
            line = self.lines.pop()
            chunk.append(line)
            size += len(line)
        return "".join(chunk).strip() or "pass"


Turn = list[Message]
Maker = Callable[[random.Random, Source, int], Turn]


def _ask(src: Source, i: int, chars: int) -> Message:
    return Message.of(
        "user", f"Turn {i}: review this and tell me what to change.\n" + src.take(chars)
    )


def _call(i: int, k: int, name: str, arguments: dict[str, Any], result: str) -> Turn:
    call = ToolCallPart(id=f"call_{i}" + (f"_{k}" if k else ""), name=name, arguments=arguments)
    return [
        Message(role="assistant", content=(call,)),
        Message(role="tool", content=(ToolResultPart(call_id=call.id, content=result),)),
    ]


def review(rng: random.Random, src: Source, i: int, big: tuple[int, int] | None = None) -> Turn:
    ask = _ask(src, i, rng.randint(200, 700))
    result = src.take(rng.randint(*big) if big else rng.randint(1_500, 6_000))
    call = _call(i, 0, "read", {"path": src.path}, result)
    reply = src.take(rng.randint(300, 900))
    return [ask, *call, Message.of("assistant", reply)]


def chat(rng: random.Random, src: Source, i: int) -> Turn:
    ask = Message.of("user", f"Turn {i}: " + src.take(rng.randint(40, 400)))
    return [ask, Message.of("assistant", src.take(rng.randint(150, 1_500)))]


def tools(rng: random.Random, src: Source, i: int) -> Turn:
    out = [_ask(src, i, rng.randint(100, 400))]
    for k in range(rng.randint(2, 6)):
        name = rng.choice(["read", "grep", "run", "list"])
        size = rng.randint(100, 800) if rng.random() < 0.5 else rng.randint(800, 4_000)
        result = src.take(size)
        out += _call(i, k, name, {"path": src.path, "n": k}, result)
    out.append(Message.of("assistant", src.take(rng.randint(100, 600))))
    return out


def large(rng: random.Random, src: Source, i: int) -> Turn:
    return review(rng, src, i, (60_000, 200_000) if i % 12 == 5 else None)


def mixed(rng: random.Random, src: Source, i: int) -> Turn:
    pick = rng.random()
    if pick < 0.5:
        return chat(rng, src, i)
    if pick < 0.8:
        return review(rng, src, i)
    if pick < 0.95:
        return tools(rng, src, i)
    return review(rng, src, i, (20_000, 80_000))


SHAPES: dict[str, Maker] = {
    "review": review,
    "chat": chat,
    "tools": tools,
    "large": large,
    "mixed": mixed,
}


def build(shape: str, turns: int, seed: int, start: int | None = None) -> tuple[str, list[Turn]]:
    """The system prompt and ``turns`` turns of ``shape``; the text starts at the standard
    library's file ``start`` (default: one the seed picks). ``review`` with ``start = 0`` and
    the original seed is the original benchmark's session."""
    rng = random.Random(seed)
    src = Source((seed * 7919) % len(stdlib_sources()) if start is None else start)
    system = "You are a careful code-review agent.\n\n" + src.take(6_000)
    make = SHAPES[shape]
    return system, [make(rng, src, i) for i in range(turns)]


# -- the provider's count ------------------------------------------------------------------


def chat_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``messages`` as Chat Completions messages (for a request the OpenAI adapter did not
    build: the rolling window's)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        calls = [p for p in m.content if isinstance(p, ToolCallPart)]
        if m.role == "tool":
            out += [
                {"role": "tool", "tool_call_id": p.call_id, "content": p.content}
                for p in m.content
                if isinstance(p, ToolResultPart)
            ]
        elif calls:
            out.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in calls
                    ],
                }
            )
        else:
            text = "\n\n".join(p.text for p in m.content if isinstance(p, TextPart))
            out.append({"role": m.role, "content": text})
    return out


def provider_count(
    messages: Sequence[Mapping[str, Any]], count: Callable[[str], int], *, ids: bool = False
) -> int:
    """Prompt tokens of Chat Completions ``messages`` as OpenAI's cookbook counts chat
    messages (``lamina_openai.counting``): 3 per message plus its role, content and name (+1),
    each tool call's name and arguments, and 3 priming the reply. ``ids``: also each tool
    call's and tool result's id (the cookbook's loop over every string value would; OpenAI
    does not say whether the model sees them)."""
    total = 3
    for message in messages:
        total += 3
        for key, value in message.items():
            if key == "tool_call_id":
                total += count(value) if ids else 0
            elif isinstance(value, str):
                total += count(value) + (1 if key == "name" else 0)
            elif isinstance(value, list) and key == "content":
                total += sum(count(p.get("text", "")) for p in value)
            elif key == "tool_calls":
                for call in value:
                    total += count(call["function"]["name"]) + count(call["function"]["arguments"])
                    total += count(call["id"]) if ids else 0
    return total


# -- measuring -----------------------------------------------------------------------------


class Meter:
    """Counts each request's tokens and the prefix it shares with the previous request."""

    def __init__(self, enc: Any, budget: int) -> None:
        self.enc, self.budget = enc, budget
        self.memo: dict[str, int] = {}
        self.prev: list[tuple[str, int]] = []
        self.inputs: list[int] = []
        self.hits: list[int] = []
        self.over = 0
        self.over_ids = 0  # over by the count that also charges tool call ids

    def count(self, text: str) -> int:
        """Tokens of ``text`` (memoized by the string)."""
        n = self.memo.get(text)
        if n is None:
            n = self.memo[text] = len(self.enc.encode(text, disallowed_special=()))
        return n

    def request(
        self, entries: list[tuple[str, str]], used: int | None = None, with_ids: int | None = None
    ) -> tuple[int, int]:
        """One request's entries (key, text) in order; ``used``: its size by the provider's
        count (requests over the budget by it are counted)."""
        sized = [(k, self.count(t)) for k, t in entries]
        total = sum(n for _, n in sized)
        shared = 0
        for (a, n), (b, _) in zip(sized, self.prev, strict=False):
            if a != b:
                break
            shared += n
        hit = shared if shared >= MIN_PREFIX else 0
        self.inputs.append(total)
        self.hits.append(hit)
        self.over += (used if used is not None else total) > self.budget
        self.over_ids += (with_ids if with_ids is not None else total) > self.budget
        self.prev = sized
        return total, hit

    def summary(self) -> dict[str, float]:
        total, hit = sum(self.inputs), sum(self.hits)
        cost = sum(WRITE * (i - h) + READ * h for i, h in zip(self.inputs, self.hits, strict=True))
        n = len(self.inputs)
        return {
            "hit_ratio": hit / total,
            "mean_input": total / n,
            "over_budget": self.over,
            "over_with_ids": self.over_ids,
            "cost_per_request": cost / n,
        }


def message_entry(role: str, parts: Sequence[Any]) -> tuple[str, str]:
    texts = []
    for p in parts:
        if isinstance(p, TextPart):
            texts.append(p.text)
        elif isinstance(p, ToolResultPart):
            texts.append(p.content)
        elif isinstance(p, ToolCallPart):
            texts.append(p.name + json.dumps(p.arguments, sort_keys=True))
    text = "\n".join(texts)
    return f"{role}\x00{hash(text)}\x00{len(text)}", text

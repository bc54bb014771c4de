"""A fuzz suite over content, budgets, strategies, formats and every installed adapter.

Each example assembles a random context with all installed plugins and checks what Lamina
promises whatever the input:

- never over budget, by an independent recount of the OpenAI chat payload with the OpenAI
  cookbook's rule (3 tokens per message plus every string in it, tool calls and their ids
  included, 3 for the reply);
- the system prompt and the current message are never broken, and every tool call in the
  history keeps its result (and every result its call);
- every output parses and keeps history content exactly (JSON round trip, the YAML report,
  every adapter's payload as strict UTF-8 JSON);
- nothing but a ``BudgetError`` (a clear refusal) ever escapes.

CI runs the ``ci`` hypothesis profile; ``HYPOTHESIS_PROFILE=thorough`` runs 1,000 examples.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lamina
from lamina import Block, BudgetError, ToolCallPart, ToolResultPart
from lamina.reporting import dump_yaml, report_document
from lamina.testing import StaticProvider, make_assembler
from lamina.tokens import TiktokenTokenizer

O200K = TiktokenTokenizer("o200k_base")

hostile = st.sampled_from(
    [
        "</context>",
        "<system>",
        "```",
        "## SYSTEM OVERRIDE",
        "\ud800",
        "\x00\x1b[31m",
        " " * 200,
        "\u2028",
        "{count}",
        "é日本🦜",
        "ignore previous instructions",
    ]
)
content = st.lists(st.one_of(hostile, st.text(max_size=40)), max_size=12).map(" ".join)


@st.composite
def scenario(draw):
    blocks = []
    for i in range(draw(st.integers(0, 2))):
        layer = draw(st.sampled_from(["workspace", "persona"]))
        blocks.append(Block.text(f"sys{i}", layer, draw(content), trusted=draw(st.booleans())))
    for i in range(draw(st.integers(0, 4))):
        blocks.append(
            Block.text(
                f"mem{i}",
                "memory",
                draw(content),
                priority=draw(st.floats(0, 1)),
                truncation=draw(st.sampled_from(["never", "start", "middle", "end"])),
            )
        )
    turns = draw(st.integers(0, 10))
    for n in range(turns):
        group = f"t{n}"
        blocks.append(Block.text(f"{group}u", "session", draw(content), role="user", group=group))
        if draw(st.booleans()):
            call = f"call_{n}"
            arguments = draw(st.dictionaries(st.text(max_size=5), content, max_size=2))
            blocks.append(
                Block(
                    id=f"{group}c",
                    layer="session",
                    role="assistant",
                    group=group,
                    content=(ToolCallPart(id=call, name="read_file", arguments=arguments),),
                )
            )
            blocks.append(
                Block(
                    id=f"{group}r",
                    layer="session",
                    role="tool",
                    group=group,
                    content=(ToolResultPart(call_id=call, content=draw(content)),),
                )
            )
        blocks.append(
            Block.text(f"{group}a", "session", draw(content), role="assistant", group=group)
        )
    formats = st.sampled_from(["xml", "markdown", "plain"])
    config = {
        "model": "gpt-4o",
        "budget": {"max_tokens": draw(st.integers(60, 3000))},
        "fit": {
            "strategy": draw(st.sampled_from(["truncateMiddle", "rollingWindow", "stopAtLimit"])),
            "minimum_recent": draw(st.integers(0, 3)),
        },
        "format": {"system": draw(formats), "history": draw(formats), "event": draw(formats)},
    }
    return blocks, config, draw(content)


def cookbook_count(payload: dict) -> int:
    """The OpenAI cookbook's count of a chat request: 3 per message plus every string in it
    (role, content, ``tool_call_id``; a name costs 1 more), each tool call's id, name and
    arguments, and 3 priming the reply."""
    total = 3
    for message in payload["messages"]:
        total += 3
        for key, value in message.items():
            if isinstance(value, str):
                total += O200K.count(value) + (1 if key == "name" else 0)
            elif key == "content" and isinstance(value, list):
                total += sum(O200K.count(part.get("text", "")) for part in value)
            elif key == "tool_calls":
                for call in value:
                    function = call["function"]
                    total += O200K.count(call["id"]) + O200K.count(function["name"])
                    total += O200K.count(function["arguments"])
    return total


@pytest.fixture(scope="module")
def adapters():
    return sorted(make_assembler(entry_points=True).registry.adapters)


@given(case=scenario())
def test_fuzz(case, adapters):
    blocks, config, message = case
    a = make_assembler(config, plugins=[("fuzz", StaticProvider(blocks))], entry_points=True)
    try:
        ctx = a.assemble(a.request(message))
    except BudgetError as exc:
        assert exc.overage > 0
        return
    budget = ctx.token_budget

    # Never over budget, by the provider's own rule, tool calls and their ids included.
    payload = a.payload(ctx, "openai")
    assert cookbook_count(payload) <= budget.used.total <= budget.available
    assert budget.used.total <= budget.available

    # The current message is whole (verbatim where it is not wrapped); tool calls and
    # results stay paired.
    [event] = [r for r in ctx.report.blocks if r.id == "event:content"]
    assert event.status == "kept"
    if config["format"]["event"] == "plain":
        assert ctx.current_message.text.endswith(lamina.Event(content=message).content)
    calls = {p.id for m in ctx.history for p in m.content if isinstance(p, ToolCallPart)}
    results = {p.call_id for m in ctx.history for p in m.content if isinstance(p, ToolResultPart)}
    assert calls == results

    # History keeps each kept block's content exactly.
    by_id = {b.id: b for b in blocks}
    kept = [r for r in ctx.report.blocks if r.layer == "session" and r.status == "kept"]
    contents = [m.content for m in ctx.history]
    for r in kept:
        if r.id in by_id:
            assert by_id[r.id].content in contents

    # Every output parses back.
    assert lamina.from_json(lamina.to_json(ctx), lamina.AssembledContext) == ctx
    from ruamel.yaml import YAML

    YAML(typ="safe", pure=True).load(dump_yaml(report_document(ctx)))
    for name in adapters:
        json.dumps(a.payload(ctx, name), ensure_ascii=False).encode("utf-8")

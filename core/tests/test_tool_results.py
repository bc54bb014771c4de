"""One huge tool result never ends a session: results over their cap keep head and tail
around a marker, inside protected turns too, before anything else is cut."""

from __future__ import annotations

import pytest

import lamina
from lamina import Block, ToolCallPart, ToolResultPart
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import turn, words
from lamina.tokens import TiktokenTokenizer

O200K = TiktokenTokenizer("o200k_base")


def tool_turn(n: int, tool: str, output: str) -> list[Block]:
    call = f"call{n}"
    return [
        Block.text(f"t{n}:u", "session", f"run {tool}", role="user", group=f"t{n}"),
        Block(
            id=f"t{n}:call",
            layer="session",
            role="assistant",
            group=f"t{n}",
            content=(ToolCallPart(id=call, name=tool, arguments={}),),
        ),
        Block(
            id=f"t{n}:result",
            layer="session",
            role="tool",
            group=f"t{n}",
            content=(ToolResultPart(call_id=call, content=output),),
        ),
    ]


HUGE = words(40_000)  # about 52,000 o200k tokens


def session(output: str = HUGE, tool: str = "read_file") -> list[Block]:
    return [*turn(0, "hi", "hello"), *tool_turn(1, tool, output)]


def test_a_huge_result_in_a_protected_turn_is_capped_and_the_context_fits():
    assert O200K.count(HUGE) > 50_000
    a = make_assembler({"model": "gpt-4o"}, plugins=[("s", StaticProvider(session()))])
    ctx = a.assemble(a.request("what did it say?", max_tokens=20_000))
    assert ctx.token_budget.used.total <= 20_000
    [capped] = [b for b in ctx.report.blocks if b.id == "t1:result"]
    assert capped.status == "truncated" and capped.strategy == "tool_result_cap"
    assert capped.original_tokens > 50_000 and capped.tokens <= 5_000  # a quarter of 20,000
    assert "read_file result over its cap" in capped.reason
    [result] = [p for m in ctx.history for p in m.content if isinstance(p, ToolResultPart)]
    assert result.content.startswith(HUGE[:200]) and result.content.endswith(HUGE[-200:])
    assert "tokens of this read_file result left out" in result.content
    # The newest turns are otherwise whole: the call and the first turn are kept as they were.
    assert [m.role for m in ctx.history] == ["user", "assistant", "user", "assistant", "tool"]


def test_a_per_tool_cap_and_a_fixed_cap_apply():
    config = {"model": "gpt-4o", "tool_results": {"max_tokens": 3000, "per_tool": {"grep": 500}}}
    a = make_assembler(config, plugins=[("s", StaticProvider(session(tool="grep")))])
    ctx = a.assemble(a.request("q", max_tokens=50_000))
    [capped] = [b for b in ctx.report.blocks if b.id == "t1:result"]
    assert 400 < capped.tokens <= 500


def test_a_result_under_its_cap_is_untouched():
    a = make_assembler({"model": "gpt-4o"}, plugins=[("s", StaticProvider(session(words(50))))])
    ctx = a.assemble(a.request("q", max_tokens=20_000))
    [kept] = [b for b in ctx.report.blocks if b.id == "t1:result"]
    assert kept.status == "kept" and kept.strategy is None


def test_the_cut_is_the_same_every_turn_so_the_cache_prefix_survives():
    first = session()
    later = [*first, *turn(2, "and then?", "nothing more")]
    a = make_assembler(
        {"model": "gpt-4o"},
        plugins=[("s", StaticProvider(lambda ctx: ctx.request.metadata["blocks"]))],
    )
    one = a.assemble(a.request("q", max_tokens=20_000, metadata={"blocks": first}))
    two = a.assemble(a.request("q", max_tokens=20_000, metadata={"blocks": later}))
    assert two.history[: len(one.history)] == one.history


def test_a_huge_result_in_a_turn_a_growing_session_adds_is_capped():
    # The stream's layout is reused from turn to turn: whether any result is over its cap is
    # found once per bucket and only for the new turn's items after that.
    small, big = words(50), words(5_000)
    turns = [session(small), [*session(small), *tool_turn(2, "grep", small)]]
    turns.append([*turns[-1], *tool_turn(3, "grep", big)])
    turns.append([*turns[-1], *turn(4, "and?", "ok")])
    a = make_assembler(
        {"model": "gpt-4o", "tool_results": {"max_tokens": 1000}},
        plugins=[("s", StaticProvider(lambda ctx: ctx.request.metadata["blocks"]))],
    )
    statuses = []
    for blocks in turns:
        ctx = a.assemble(a.request("q", max_tokens=50_000, metadata={"blocks": blocks}))
        statuses.append({b.id: b.strategy for b in ctx.report.blocks if b.id.endswith("result")})
    assert [s.get("t3:result") for s in statuses] == [None, None, *["tool_result_cap"] * 2]
    assert all(s["t1:result"] is None and s.get("t2:result") is None for s in statuses)


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ({"per_tool": {"grep": 0}}, "must be > 0"),
        ({"marker": "{omitted:>999999999}"}, "may only use"),
        ({"share": 0}, "share"),
    ],
)
def test_bad_caps_are_config_errors(section, says):
    with pytest.raises(lamina.ConfigError, match=says):
        make_assembler({"tool_results": section})

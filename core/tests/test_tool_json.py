"""The tools a request offers are serialized once per ``Tool`` object (``lamina.assembly.
tool_json``): the stable prefix's hash and the tools' token cost are what they were when every
request serialized them again, and a host passing the same tools pays for them once."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lamina.assembly.plan as plan_module
import lamina.assembly.tool_json as tool_json
from lamina import Tool
from lamina.serde import unstructure
from lamina.testing import make_assembler

names = st.text(alphabet="abcdefghij_", min_size=1, max_size=8)
schemas = st.dictionaries(
    names, st.recursive(st.none() | st.integers() | st.text(max_size=5), st.lists, max_leaves=4)
)
tools = st.lists(
    st.builds(
        Tool,
        name=names,
        description=st.text(max_size=30),
        input_schema=schemas,
        permission=st.none() | names,
    ),
    max_size=6,
)


@settings(max_examples=80, deadline=None)
@given(offered=tools, prefix=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
def test_the_hash_is_the_one_made_from_the_whole_list(offered: list[Tool], prefix: str) -> None:
    whole = json.dumps([unstructure(t) for t in offered], sort_keys=True, ensure_ascii=False)
    expected = hashlib.sha256(f"{whole}\x00{prefix}".encode()).hexdigest() if offered else prefix
    assert tool_json.with_tools(prefix, offered) == expected
    assert tool_json.with_tools(prefix, offered) == expected  # and again, from what was kept
    listed = hashlib.sha256(whole.encode()).hexdigest() if offered else None
    assert tool_json.tools_digest(offered) == listed
    other = prefix[::-1]
    again = hashlib.sha256(f"{whole}\x00{other}".encode()).hexdigest() if offered else other
    assert tool_json.with_tools(other, offered) == again  # the kept digest, another prefix
    for t in offered:
        assert json.loads(tool_json.counted_json(t)) == {
            "name": t.name,
            "description": t.description,
            "input_schema": t.input_schema,
        }


def test_the_same_tools_are_serialized_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = tool_json.unstructure

    def spied(tool: Any) -> Any:
        made.append(tool.name)
        return real(tool)

    monkeypatch.setattr(tool_json, "unstructure", spied)
    offered = tuple(
        Tool(name=f"tool_{i}", input_schema={"type": "object", "properties": {"x": {}}})
        for i in range(50)
    )
    with make_assembler({"model": "gpt-4o"}) as a:
        first = a.assemble(a.request("one", tools=offered))
        again = a.assemble(a.request("two", tools=offered))
        copies = tuple(Tool(name=t.name, input_schema=dict(t.input_schema)) for t in offered)
        fresh = a.assemble(a.request("three", tools=copies))
    assert made == [t.name for t in offered] * 2  # the first request and the equal copies
    assert first.report.stable_prefix.sha256 == again.report.stable_prefix.sha256
    assert fresh.report.stable_prefix.sha256 == first.report.stable_prefix.sha256
    assert first.token_budget.used.total == fresh.token_budget.used.total > 0


def test_what_is_kept_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_json, "KEPT", 8)
    monkeypatch.setattr(tool_json, "_made", {})
    for i in range(20):
        tool_json.counted_json(Tool(name=f"t{i}"))
        assert len(tool_json._made) <= 8


def test_the_tools_cost_is_kept_for_the_same_tools_until_the_counts_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counted: list[str] = []
    real = plan_module.counted_json
    monkeypatch.setattr(plan_module, "counted_json", lambda t: counted.append(t.name) or real(t))
    offered = tuple(Tool(name=f"tool_{i}", description="does a thing") for i in range(5))
    with make_assembler({"model": "gpt-4o"}) as a:
        first = a.assemble(a.request("one", tools=offered)).token_budget.used.total
        assert a.assemble(a.request("one", tools=offered)).token_budget.used.total == first
        assert counted == [t.name for t in offered]
        a.assemble(a.request("one", tools=offered[:3]))  # another list of tools: counted
        assert len(counted) == 8
        a.model("gpt-4o").revision[0] = "before"  # the tokenizer's counts changed since
        assert a.assemble(a.request("one", tools=offered)).token_budget.used.total == first
        assert len(counted) == 13

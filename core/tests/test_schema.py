"""The one JSON Schema of the wire types: generated from the attrs model, shipped in
docs/schema/ in step with it, a valid draft 2020-12 schema, and in agreement with
``lamina.serde``: what serde writes the schema accepts, and what the schema refuses serde
refuses too."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina import (
    AgentResult,
    ImagePart,
    Message,
    SerdeError,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from lamina.schema import json_schema, render
from lamina.serde import structure, unstructure
from lamina.serve.wire import AssemblyInput, Problem
from lamina.testing import make_assembler

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "docs" / "schema" / "lamina.schema.json"
SCHEMA = json_schema()


def check(name: str, data: Any) -> list[str]:
    schema = {k: v for k, v in SCHEMA.items() if k != "anyOf"} | {"$ref": f"#/$defs/{name}"}
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_the_shipped_schema_is_the_generated_one():
    current = SHIPPED.read_text("utf-8") if SHIPPED.is_file() else ""
    expected = render()
    if current != expected:
        diff = "".join(
            difflib.unified_diff(
                current.splitlines(True), expected.splitlines(True), str(SHIPPED), "generated"
            )
        )
        pytest.fail(
            "docs/schema/lamina.schema.json is stale; run "
            f".venv/bin/python -m lamina.schema docs/schema/lamina.schema.json\n{diff}"
        )


def test_it_is_a_valid_draft_2020_12_schema_naming_every_wire_type():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for name in (
        "AssemblyInput",
        "AssembledContext",
        "AgentResult",
        "AssemblyReport",
        "CompactionInput",
        "CompactionOutcome",
        "SessionStats",
        "TurnRecorded",
        "Health",
        "PluginInfo",
        "Problem",
    ):
        assert name in SCHEMA["$defs"], name


def test_an_assembled_context_as_served_validates():
    history = (
        Message.of("user", "list the files"),
        Message(
            role="assistant", content=(ToolCallPart(id="c1", name="ls", arguments={"p": "."}),)
        ),
        Message(role="tool", content=(ToolResultPart(call_id="c1", content="a.txt"),)),
        Message.of("assistant", "a.txt"),
    )
    a = make_assembler({"model": "gpt-4o"})
    ctx = a.assemble(a.request("next", history=history))
    assert check("AssembledContext", unstructure(ctx)) == []
    assert check("AssemblyReport", unstructure(ctx.report)) == []


def test_what_the_schema_requires_of_a_request_is_what_serde_requires():
    assert check("AssemblyInput", {}) == []  # everything may come from config
    assert check("AgentResult", {}) != []
    with pytest.raises(SerdeError, match="required field missing"):
        structure({}, AgentResult)


@pytest.mark.parametrize(
    ("name", "cls", "data"),
    [
        ("AssemblyInput", AssemblyInput, {"message": "hi", "workspace_path": "/etc"}),
        ("AssemblyInput", AssemblyInput, {"message": "hi", "max_tokens": 0}),
        ("AssemblyInput", AssemblyInput, {"role": "boss"}),
        ("AgentResult", AgentResult, {"messages": [{"role": "user", "content": "text"}]}),
        ("AgentResult", AgentResult, {"messages": [], "usage": {"input_tokens": -1}}),
        (
            "AgentResult",
            AgentResult,
            {"messages": [{"role": "user", "content": [{"type": "video", "url": "x"}]}]},
        ),
    ],
)
def test_what_the_schema_refuses_serde_refuses(name, cls, data):
    assert check(name, data) != []
    with pytest.raises(SerdeError):
        structure(data, cls)


def test_a_problem_is_written_without_its_empty_fields():
    data = {"type": "urn:lamina:problem:http", "title": "Not found", "status": 404, "detail": "x"}
    assert check("Problem", data) == []
    structure(data, Problem)


# -- what serde writes, the schema accepts -------------------------------------------------------

text = st.text(max_size=20)
parts = st.one_of(
    st.builds(TextPart, text=text),
    st.builds(ImagePart, media_type=st.just("image/png"), data=st.just("aGk="), url=st.none()),
    st.builds(
        ToolCallPart,
        id=text,
        name=text,
        arguments=st.dictionaries(text, st.one_of(text, st.integers(), st.none()), max_size=3),
    ),
    st.builds(ToolResultPart, call_id=text, content=text, is_error=st.booleans()),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(parts, max_size=3).map(tuple),
    name=st.none() | text,
)
counts = st.integers(min_value=0, max_value=10**9)
results = st.builds(
    AgentResult,
    messages=st.lists(messages, max_size=4).map(tuple),
    usage=st.builds(
        Usage,
        input_tokens=counts,
        cached_input_tokens=counts,
        cache_creation_tokens=counts,
        output_tokens=counts,
    ),
    stop_reason=text,
    error=st.none() | text,
    model=st.none() | text,
)


@given(results)
def test_every_agent_result_serde_writes_validates_and_reads_back(result):
    data = json.loads(json.dumps(unstructure(result)))
    assert check("AgentResult", data) == []
    assert structure(data, AgentResult) == result

"""The YAML report written without ruamel gives ruamel's bytes: for every string it writes
plain (both readers take it for that string), and for whole documents of mappings, lists,
numbers, booleans and ``None``; anything else is left to ruamel."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import reporting
from lamina.reporting import dump_yaml

#: Characters and pieces that decide how YAML reads a scalar.
TRICKY = st.sampled_from(
    [
        *"aZey_.,/()+=@-: #'\"!&*?|>%`[]{}~\t\n0125xXbBoO…é",
        *("yes", "No", "ON", "null", "Null", "~", ".inf", ".NaN", "true", "1e5", "0x1F", "0b1"),
        *("1:20", "2001-12-14", "<<", "=", "+1", "1_000", "deadbeef", "9db38a2c", "acd", "f0"),
    ]
)
WORDS = st.lists(TRICKY, max_size=8).map("".join)
#: Mostly strings written plain, so that many documents are written without ruamel.
NAMES = st.one_of(
    st.from_regex(r"(\.|[0-9]+ )?[a-zA-Z_][a-z0-9_.:/ ()@-]{0,12}", fullmatch=True), WORDS
)
SCALARS = st.one_of(
    NAMES,
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(NAMES, inner, max_size=4)),
    max_leaves=20,
)


def _reads_as(text: str, version: str) -> object:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(f"%YAML {version}\n---\n{text}")


@settings(max_examples=600, deadline=None)
@given(st.one_of(WORDS, NAMES))
def test_a_string_written_plain_is_what_ruamel_writes_and_reads_back(value):
    if reporting._scalar(value) is None:
        return
    assert reporting._ruamel_yaml({"k": value}) == f"k: {value}\n"
    for version in ("1.1", "1.2"):
        assert _reads_as(f"k: {value}\n", version) == {"k": value}


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(NAMES, DOCUMENTS, min_size=1, max_size=5))
def test_a_document_written_without_ruamel_has_ruamels_bytes(document):
    assert dump_yaml(document) == reporting._ruamel_yaml(document)


def test_a_report_shaped_document_is_written_without_ruamel():
    document = {
        "assembly_report": {
            "budget": {"max": 115712, "used_by_layer": {"system_prompt": 800}},
            "tokenizer": {"name": "o200k_base", "exact": True},
            "stable_prefix": {"tokens": 1049, "sha256": "9db38a2c824170a981083f1f8679de6c"},
            "layers": [{"layer": "workspace", "placement": "system", "blocks": 3}],
            "included": [
                {"path": ".agent/constitution.md", "truncated": False},
                {"path": "ledger:demo/m1:0", "tokens": 15},
            ],
            "excluded": [],
            "warnings": ["1 block truncated or summarized"],
            "timings_ms": {"gather": 12.5, "fit": 0.25},
        }
    }
    lines: list[str] = []
    assert reporting._block(document, 0, lines)
    assert dump_yaml(document) == reporting._ruamel_yaml(document)


def test_what_needs_ruamel_goes_to_it():
    for value in ("a: b", "on", "", " x", "x\n", "1e5", math.inf, (1, 2), b"x", "naïve"):
        assert reporting._scalar(value) is None or value == "naïve"
    assert dump_yaml({"v": "a: b"}) == reporting._ruamel_yaml({"v": "a: b"}) == "v: 'a: b'\n"

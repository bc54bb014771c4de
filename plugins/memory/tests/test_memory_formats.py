"""The Cortex draft's injection formats (raw, summary, structured), for the layer and per
source, and their validation."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import lamina_memory.plugin as memory_plugin
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lamina_memory.formats import SUMMARY_WORDS, summarize
from lamina_memory.records import Chunk, Entity

from lamina import ConfigError
from lamina.testing import make_assembler

LONG = (
    "The staging config lives in deploy/staging.toml. It was moved there in March after the "
    "vault migration, and every service reads it at start-up through the config loader."
)
WHEN = datetime(2026, 1, 1, 9, 30, tzinfo=UTC)


def _yielded(svc: Any, asm: Any, message: str) -> list[Any]:
    """The blocks the memory provider yields for ``message``."""
    seen: list[Any] = []
    original = svc.blocks

    def record(ctx: Any) -> Any:
        out = original(ctx)
        seen.extend(out[0])
        return out

    svc.blocks = record  # type: ignore[method-assign]
    asm.assemble(asm.request(message))
    return seen


def _blocks(make: Any, section: dict[str, Any], message: str) -> dict[str, Any]:
    asm, svc = make(section)
    svc.add(
        [
            Chunk(id="c1", text=LONG, time=WHEN),
            Chunk(id="c2", text="Staging runs Debian. Production runs Alpine.", time=WHEN),
            Entity(id="n1", type="service", name="Staging", salience=0.9),
        ]
    )
    return {b.provenance.metadata.get("section"): b for b in _yielded(svc, asm, message)}


def test_raw_is_each_memory_verbatim(make: Any) -> None:
    blocks = _blocks(make, {}, "where is the staging config?")
    assert LONG in blocks["Relevant Content"].body.split("\n")


def test_summary_keeps_the_first_sentence(make: Any) -> None:
    blocks = _blocks(make, {"format": "summary"}, "where is the staging config?")
    lines = blocks["Relevant Content"].body.split("\n")
    assert "The staging config lives in deploy/staging.toml. …" in lines
    assert "Staging runs Debian. …" in lines
    assert all(line.strip() for line in lines)


def test_structured_is_one_json_object_per_memory(make: Any) -> None:
    blocks = _blocks(make, {"format": "structured"}, "where is the staging config?")
    items = [json.loads(line) for line in blocks["Relevant Content"].body.split("\n")]
    by_id = {i["id"]: i for i in items}
    assert by_id["c1"]["text"] == LONG and by_id["c1"]["kind"] == "chunk"
    assert by_id["c1"]["time"] == "2026-01-01T09:30:00+00:00"
    assert 0 < by_id["c1"]["relevance"] <= 1
    (entity,) = [json.loads(line) for line in blocks["Known Entities"].body.split("\n")]
    assert entity == {"id": "n1", "kind": "entity", "relevance": 1.0, "text": "Staging (service)"}


def test_formats_per_source_override_the_layer_format(make: Any) -> None:
    section = {"format": "summary", "formats": {"entities": "structured"}}
    blocks = _blocks(make, section, "where is the staging config?")
    assert "The staging config lives in deploy/staging.toml. …" in blocks["Relevant Content"].body
    assert json.loads(blocks["Known Entities"].body)["text"] == "Staging (service)"


def test_summary_fits_more_memories_in_a_small_budget(make: Any) -> None:
    def count(fmt: str) -> int:
        asm, svc = make({"format": fmt, "max_tokens": 160, "compress": False})
        svc.add([Chunk(id=f"c{i}", text=f"Deploy note {i}. {LONG}") for i in range(12)])
        blocks = _yielded(svc, asm, "deploy note staging config")
        return sum(len(b.provenance.metadata.get("items", ())) for b in blocks)

    assert count("summary") > count("raw") >= 1


@given(st.text(min_size=1).filter(lambda t: t.strip()))
def test_a_summary_is_never_empty_and_never_long(text: str) -> None:
    out = summarize(text)
    assert out.strip()
    assert len(out.split()) <= SUMMARY_WORDS + 1  # the words kept and the ellipsis


@pytest.mark.parametrize(
    ("section", "error"),
    [
        ({"format": "prose"}, r"plugin 'memory': format: unknown format 'prose'.*plugins\.memory"),
        ({"formats": {"semantic": "html"}}, r"plugin 'memory': formats: unknown formats"),
        ({"formats": {"gossip": "raw"}}, r"plugin 'memory': formats: unknown sources \['gossip'\]"),
    ],
)
def test_bad_formats_fail_at_set_up(section: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        make_assembler(
            {"model": "gpt-4o", "plugins": {"memory": {"store": "memory:", **section}}},
            plugins=[("memory", memory_plugin)],
        )

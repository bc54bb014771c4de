"""The memory framework design's ContextBuilder: build, estimate_tokens, compress and
update_context, and the layer provider built on it (one code path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lamina_memory.builder import Context, ContextBuilder, ContextRequest
from lamina_memory.layout import Layout
from lamina_memory.query import SECTIONS, Filters
from lamina_memory.records import Candidate, Chunk, Entity, EpisodicEvent
from lamina_memory.selection import Selection

from lamina.tokens import TiktokenTokenizer

TOK = TiktokenTokenizer("o200k_base")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _filled(make: Any, **section: Any) -> tuple[Any, Any]:
    asm, svc = make({"compress": False, **section})
    svc.add(
        [
            Chunk(id="c1", text="The staging config lives in deploy/staging.toml"),
            Chunk(id="c2", text="The staging server runs Debian"),
            Chunk(id="c3", text="Lunch is at noon on Fridays"),
            EpisodicEvent(
                id="e1", type="message", text="We deployed staging", time=NOW, session="s"
            ),
            Entity(id="n1", type="service", name="Staging", salience=0.6),
        ]
    )
    return asm, svc


def test_build_returns_the_designs_context(make: Any) -> None:
    _asm, svc = _filled(make)
    builder = svc.builder(TOK, "markdown")
    ctx = builder.build(
        ContextRequest(
            query="where is the staging config?", session_id="s", max_tokens=400, now=NOW
        )
    )
    assert isinstance(ctx, Context)
    assert "deploy/staging.toml" in ctx.content
    assert builder.estimate_tokens(ctx.content) <= ctx.token_count
    assert ctx.token_count <= 400 and not ctx.truncated
    types = {c.type for c in ctx.components}
    assert {"semantic", "recent", "entity"} <= types
    by_source = {c.source: c for c in ctx.components}
    assert by_source["c1"].content == "The staging config lives in deploy/staging.toml"
    assert by_source["c1"].tokens > 0 and 0 < by_source["c1"].relevance_score <= 1
    assert ctx.metadata.query == "where is the staging config?"
    assert ctx.metadata.events_considered == 1 and ctx.metadata.entities_considered == 1
    assert ctx.metadata.chunks_searched == 3 and ctx.metadata.assembly_time_ms >= 0
    assert ctx.strategy == pytest.approx((0.3, 0.5, 0.2))  # balanced


def test_request_strategy_filters_and_additional_context(make: Any) -> None:
    _asm, svc = _filled(make)
    builder = svc.builder(TOK, "markdown")
    ctx = builder.build(
        ContextRequest(
            query="staging",
            session_id="s",
            max_tokens=400,
            now=NOW,
            strategy="recency",
            additional_context="The release is frozen until Monday",
            filters=Filters(exclude_ids=frozenset({"c2"})),
        )
    )
    assert ctx.strategy == pytest.approx((0.6, 0.3, 0.1))
    assert "Debian" not in ctx.content  # excluded
    assert "Additional Context\nThe release is frozen until Monday" in ctx.content
    assert "The release is frozen until Monday" in ctx.content
    assert any(c.type == "custom" for c in ctx.components)


def test_a_small_budget_truncates(make: Any) -> None:
    _asm, svc = _filled(make)
    ctx = svc.builder(TOK, "markdown").build(
        ContextRequest(query="staging config server", session_id="s", max_tokens=40, now=NOW)
    )
    assert ctx.truncated and 0 < ctx.token_count <= 40


def test_the_layer_provider_is_the_builder(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    asm, _svc = _filled(make)
    requests: list[ContextRequest] = []
    real = ContextBuilder.build

    def spy(self: ContextBuilder, request: ContextRequest) -> Context:
        requests.append(request)
        return real(self, request)

    monkeypatch.setattr(ContextBuilder, "build", spy)
    ctx = asm.assemble(
        asm.request(
            "where is the staging config?",
            metadata={"memory": {"additional_context": "Ask Ann first", "strategy": "relevance"}},
        )
    )
    (request,) = requests
    assert request.query == "where is the staging config?" and request.max_tokens == 1024
    assert request.strategy == "relevance" and request.additional_context == "Ask Ann first"
    assert "Ask Ann first" in ctx.current_message.text


def test_update_context_puts_the_event_first_and_drops_the_lowest(make: Any) -> None:
    _asm, svc = _filled(make)
    builder = svc.builder(TOK, "markdown")
    ctx = builder.build(
        ContextRequest(query="staging config server", session_id="s", max_tokens=400, now=NOW)
    )
    event = EpisodicEvent(
        id="e9", type="error", text="Deploy failed: vault token expired", time=NOW, session="s"
    )
    grown = builder.update_context(ctx, event, max_tokens=400)
    assert grown.components[0].source == "e9" and grown.components[0].relevance_score == 1.0
    assert "vault token expired" in grown.content and not grown.truncated
    assert len(grown.components) == len(ctx.components) + 1
    tight = builder.update_context(ctx, event, max_tokens=ctx.token_count)
    assert tight.truncated and tight.token_count <= ctx.token_count
    assert tight.components[0].source == "e9"
    lowest = min(ctx.components, key=lambda c: c.relevance_score)
    assert len(tight.components) <= len(ctx.components)
    assert lowest.source not in {c.source for c in tight.components} or len(
        tight.components
    ) == len(ctx.components)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=8),
    st.integers(min_value=0, max_value=60),
)
def test_compress_fits_and_is_empty_only_when_no_word_fits(lines: list[str], budget: int) -> None:
    builder = ContextBuilder(None, tokenizer=TOK, formatter="markdown")  # type: ignore[arg-type]
    content = "\n".join(lines)
    out = builder.compress(content, budget)
    assert TOK.count(out) <= budget or (out == content and TOK.count(content) <= budget)
    words = content.split()
    if words and TOK.count(f"{words[0]} …") <= budget:
        assert out.strip()


def test_compression_never_emits_an_empty_block() -> None:
    layout = Layout(
        __import__("lamina").Formatter(name="plain", render=lambda b: b.body),
        TOK.count,
        plugin="memory",
    )
    blank = Candidate(
        key="chunk:x", source="semantic", section=SECTIONS["semantic"], text="  \n ", relevance=0.1
    )
    selection = Selection(chosen=(), overflow=(blank,), used=0, budget=500)
    assert layout.fit(selection, compress=True, compress_min=10) == []


def test_overflow_is_offered_as_first_sentences(make: Any) -> None:
    _asm, svc = make({"max_tokens": 120, "compress_min_tokens": 10})
    long = "Staging notes. " + "filler words " * 40
    svc.add([Chunk(id=f"c{i}", text=f"staging item {i}. {long}") for i in range(5)])
    ctx = svc.builder(TOK, "markdown").build(
        ContextRequest(query="staging item", session_id="s", max_tokens=120, now=NOW + timedelta(1))
    )
    (extra,) = [b for b in ctx.blocks if b.id == "memory.additional"]
    assert extra.body.strip() and all(line.endswith("…") for line in extra.body.split("\n"))

"""Context editing: with ``[tool_results] stub_after = N``, tool results in turns older than
the newest N are replaced by a one-line stub naming the call and its size, N turns at a time,
so the request's start changes once every N turns; the same history gives the same bytes
from a warm assembler as from a fresh one."""

from __future__ import annotations

import pytest

import lamina
from lamina import Block, ToolCallPart, ToolResultPart
from lamina.assembly.tool_results import stub_boundary
from lamina.serde import to_json
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import tool_turn, words


def history(turns: int, size: int = 400) -> list[Block]:
    return [b for n in range(turns) for b in tool_turn(n, f"look at file {n}", words(size, n))]


def dynamic(config: dict) -> lamina.Assembler:
    provider = StaticProvider(lambda ctx: ctx.request.metadata["blocks"])
    return make_assembler({"model": "gpt-4o", **config}, plugins=[("s", provider)])


def results(ctx: lamina.AssembledContext) -> list[str]:
    return [p.content for m in ctx.history for p in m.content if isinstance(p, ToolResultPart)]


EDITING = {"tool_results": {"stub_after": 2}}


def test_the_boundary_moves_n_turns_at_a_time():
    assert [stub_boundary(g, 2) for g in range(9)] == [0, 0, 0, 0, 2, 2, 4, 4, 6]
    assert [stub_boundary(g, 3) for g in range(10)] == [0, 0, 0, 0, 0, 0, 3, 3, 3, 6]


def test_old_results_become_one_line_stubs_named_in_the_report():
    a = dynamic(EDITING)
    ctx = a.assemble(a.request("q", max_tokens=50_000, metadata={"blocks": history(6)}))
    got = results(ctx)
    # 6 turns, N = 2: the oldest 4 are stubbed, the newest 2 are whole.
    assert got[4:] == [words(400, 4), words(400, 5)]
    for n, stub in enumerate(got[:4]):
        assert "\n" not in stub
        assert stub.startswith("[read_file result cleared from the context: ")
        assert f"call call{n}" in stub and f'"path": "f{n}.py"' in stub
    sizes = {b.id: b for b in ctx.report.blocks if b.id.endswith(":result")}
    for n in range(4):
        stubbed = sizes[f"t{n}:result"]
        assert stubbed.status == "truncated" and stubbed.strategy == "tool_result_stub"
        assert f"read_file result of call call{n} ({stubbed.original_tokens} tokens)" in (
            stubbed.reason or ""
        )
        assert f"{stubbed.original_tokens} tokens" in got[n]
        assert stubbed.tokens < 60
    assert sizes["t5:result"].status == "kept"
    # The calls and the replies stay as they were.
    assert sum(isinstance(p, ToolCallPart) for m in ctx.history for p in m.content) == 6


def test_off_by_default_and_small_results_are_kept():
    a = dynamic({})
    ctx = a.assemble(a.request("q", max_tokens=50_000, metadata={"blocks": history(6)}))
    assert results(ctx) == [words(400, n) for n in range(6)]
    b = dynamic({"tool_results": {"stub_after": 2, "stub_over": 1000}})
    ctx = b.assemble(b.request("q", max_tokens=50_000, metadata={"blocks": history(6)}))
    assert results(ctx) == [words(400, n) for n in range(6)]


def test_the_prefix_changes_only_when_the_boundary_moves():
    a = dynamic({"tool_results": {"stub_after": 3}})
    previous = None
    changed = []
    for turns in range(1, 16):
        ctx = a.assemble(a.request("q", max_tokens=50_000, metadata={"blocks": history(turns)}))
        if previous is not None and ctx.history[: len(previous)] != previous:
            changed.append(turns)
        previous = ctx.history
    assert changed == [6, 9, 12, 15]


def test_the_stub_is_the_same_text_every_turn():
    a = dynamic(EDITING)
    seen: dict[int, str] = {}
    for turns in range(4, 12):
        ctx = a.assemble(a.request("q", max_tokens=50_000, metadata={"blocks": history(turns)}))
        for n, text in enumerate(results(ctx)):
            if text.startswith("[read_file result cleared"):
                assert seen.setdefault(n, text) == text
    assert len(seen) == 8


def _same(first: lamina.AssembledContext, second: lamina.AssembledContext) -> None:
    strip = lambda c: to_json(c).split('"timings_ms"')[0]  # noqa: E731
    assert strip(first) == strip(second)


@pytest.mark.parametrize(
    ("fit", "budget"),
    [
        ({"strategy": "rollingWindow", "minimum_recent": 1}, 3_000),
        ({"strategy": "truncateMiddle", "minimum_recent": 2}, 2_000),
        ({"strategy": "rollingWindow"}, 50_000),
    ],
)
def test_a_warm_assembler_gives_what_a_fresh_one_gives(fit, budget):
    config = {"fit": fit, "tool_results": {"stub_after": 2, "max_tokens": 300}}
    warm = dynamic(config)
    stubbed = 0
    for turns in [1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10, 12, 13]:
        blocks = history(turns, 250 + 100 * (turns % 3))
        request = warm.request("q", max_tokens=budget, metadata={"blocks": blocks})
        got = warm.assemble(request, verbose_report=turns % 2 == 0)
        fresh = dynamic(config)
        _same(got, fresh.assemble(request, verbose_report=turns % 2 == 0))
        stubbed += sum(b.strategy == "tool_result_stub" for b in got.report.blocks)
    assert stubbed > 0


def test_results_the_previous_call_cut_are_stubbed_like_a_fresh_assembler_does():
    """Turn 3 cuts its oldest turn (no stubs yet); on turn 4 the cut turns are stubbed and
    kept: the warm assembler must put the previous cut back before stubbing."""
    config = {
        "fit": {"strategy": "rollingWindow", "minimum_recent": 1},
        "tool_results": {"stub_after": 2, "max_tokens": 10_000},
    }
    warm = dynamic(config)
    for turns in (3, 4):
        request = warm.request("q", max_tokens=1_800, metadata={"blocks": history(turns, 300)})
        got, fresh = warm.assemble(request), dynamic(config).assemble(request)
        _same(got, fresh)
        assert bool(got.report.dropped) == (turns == 3)


def test_a_stubbed_session_alternating_with_another_stream_stays_byte_identical():
    config = {"tool_results": {"stub_after": 2}}
    warm = dynamic(config)
    for turns in range(3, 10):
        for label, size in (("a", 300), ("b", 500)):
            request = warm.request(
                "q",
                session_label=label,
                max_tokens=4_000,
                metadata={"blocks": history(turns, size)},
            )
            _same(warm.assemble(request), dynamic(config).assemble(request))


def test_stubs_come_before_caps_and_cutting():
    """A budget that needed the oldest turns cut keeps them all once old results are stubs."""
    blocks = history(8)
    plain = dynamic({})
    ctx = plain.assemble(plain.request("q", max_tokens=5_000, metadata={"blocks": blocks}))
    assert ctx.report.dropped
    a = dynamic({"tool_results": {"stub_after": 2}})
    ctx = a.assemble(a.request("q", max_tokens=5_000, metadata={"blocks": blocks}))
    assert not ctx.report.dropped and ctx.token_budget.used.total <= 5_000


@pytest.mark.parametrize(
    ("section", "says"),
    [
        ({"stub_after": -1}, "stub_after"),
        ({"stub_over": -5}, "stub_over"),
        ({"stub": "[{tool} {size}]"}, "may only use"),
        ({"stub": "[{tool}]\ncleared"}, "one line"),
    ],
)
def test_bad_context_editing_settings_are_config_errors(section, says):
    with pytest.raises(lamina.ConfigError, match=says):
        make_assembler({"tool_results": section})

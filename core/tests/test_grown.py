"""A stream's call whose history only grew since a call that kept everything whole is made
from that call's context (``lamina.assembly.grown``), and gives byte for byte what the full
pipeline of a fresh assembler gives: checked over random sessions that grow by turns (tool
calls, results over their cap), change their system prompt, budget, event, memory (capped
blocks in the current message) and report, and over calls that need a cut. Anything the grown
path cannot make again leaves it to the full pipeline."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina import AssembledContext, Block, BudgetError
from lamina.model.messages import ToolCallPart, ToolResultPart
from lamina.serde import to_json
from lamina.testing import StaticProvider, make_assembler
from lamina.testing.history import words

CONFIG: dict[str, Any] = {
    "model": "gpt-4o",
    "budget": {"max_tokens": 4000, "reserve_response": 0, "reserve_tools": 0},
}


def _turn(n: int, size: int, tool: int = 0) -> list[Block]:
    """A user message and a reply; with ``tool``, a call and a result of ``tool`` words."""
    user = Block.text(f"t{n}u", "session", words(size, n), role="user", group=f"t{n}")
    reply = Block.text(f"t{n}a", "session", words(size, n + 5), role="assistant", group=f"t{n}")
    if not tool:
        return [user, reply]
    call = Block(
        id=f"t{n}c",
        layer="session",
        role="assistant",
        group=f"t{n}",
        content=(ToolCallPart(id=f"c{n}", name="read", arguments={"n": n}),),
    )
    result = Block(
        id=f"t{n}r",
        layer="session",
        role="user",
        group=f"t{n}",
        content=(ToolResultPart(call_id=f"c{n}", content=words(tool, n + 3)),),
    )
    return [user, call, result, reply]


def _strip(ctx: AssembledContext) -> str:
    return to_json(ctx).split('"timings_ms"')[0]


def _outcome(assembler: Any, request: Any, **kw: Any) -> AssembledContext | str:
    try:
        ctx: AssembledContext = assembler.assemble(request, **kw)
    except BudgetError as exc:
        return str(exc)
    return ctx


def _grown(ctx: AssembledContext | str) -> bool:
    return not isinstance(ctx, str) and "grown" in ctx.report.timings_ms


OPS = ["grow", "grow", "grow", "tool", "big", "same", "system", "memory", "budget", "verbose"]


@settings(deadline=None, max_examples=60)
@given(
    ops=st.lists(st.sampled_from(OPS), min_size=2, max_size=10),
    sizes=st.lists(st.integers(2, 60), min_size=10, max_size=10),
    budget=st.sampled_from([None, 600, 1200]),
    split=st.booleans(),
)
def test_a_grown_call_gives_what_the_full_pipeline_gives(
    ops: list[str], sizes: list[int], budget: int | None, split: bool
) -> None:
    """``split``: the system prompt, the history and the memory come from three providers
    (as with the ledger), else from one."""
    system = [Block.text("rules", "workspace", "Be brief.", trusted=True)]
    history = [b for n in range(3) for b in _turn(n, sizes[n])]
    memory: list[Block] = []
    blocks = {"now": [*system, *history]}
    parts: dict[str, list[Block]] = {}

    def providers(source: dict[str, list[Block]], live: bool) -> list[tuple[str, object]]:
        def of(key: str) -> Any:
            return (lambda ctx: source[key]) if live else list(source[key])

        if not split:
            return [("f", StaticProvider(of("now")))]
        return [
            (f"p-{k}", StaticProvider(of(k), name=f"p-{k}"))
            for k in ("system", "history", "memory")
        ]

    warm = make_assembler(CONFIG, plugins=providers(parts, live=True))
    verbose = False
    for n, op in enumerate(ops, start=3):
        size = sizes[n % len(sizes)]
        if op == "grow":
            history = history + _turn(n, size)
        elif op == "tool":
            history = history + _turn(n, size, tool=size * 2)
        elif op == "big":  # a result over the smallest cap (a quarter of the available tokens)
            history = history + _turn(n, size, tool=2000)
        elif op == "system":
            system = [Block.text("rules", "workspace", words(size, n), trusted=True)]
        elif op == "memory":
            memory = [
                Block.text(f"m{n}", "memory", words(size, n), priority=0.4),
                Block.text("note", "memory", words(size * 2, n), max_tokens=40, priority=0.6),
            ]
        elif op == "budget":
            budget = None if budget else 900
        elif op == "verbose":
            verbose = not verbose
        blocks["now"] = [*system, *history, *memory]
        parts.update(now=blocks["now"], system=system, history=history, memory=memory)
        request = warm.request(words(size, n + 11), max_tokens=budget)
        fresh = make_assembler(CONFIG, plugins=providers(dict(parts), live=False))
        expected = _outcome(fresh, request, verbose_report=verbose)
        outcome = _outcome(warm, request, verbose_report=verbose)
        if isinstance(outcome, str) or isinstance(expected, str):
            assert outcome == expected
        else:
            assert _strip(outcome) == _strip(expected)
        fresh.close()
    warm.close()


LARGE = {**CONFIG, "budget": {**CONFIG["budget"], "max_tokens": 100_000}}


def _session(turns: int = 40) -> tuple[Any, dict[str, list[Block]], list[Block]]:
    system = [Block.text("rules", "workspace", "Be brief.", trusted=True)]
    history = [b for n in range(turns) for b in _turn(n, 20)]
    blocks = {"now": [*system, *history]}
    warm = make_assembler(LARGE, plugins=[("f", StaticProvider(lambda ctx: blocks["now"]))])
    return warm, blocks, history


def test_a_session_that_grows_by_a_turn_runs_no_phase_after_gather() -> None:
    warm, blocks, history = _session()
    first = warm.assemble(warm.request("q"))
    assert "place" in first.report.timings_ms and "grown" not in first.report.timings_ms
    for n in range(40, 50):
        history = history + _turn(n, 20)
        blocks["now"] = [blocks["now"][0], *history]
        ctx = warm.assemble(warm.request(f"q{n}"))
        assert set(ctx.report.timings_ms) == {"plan", "gather", "grown"}
        assert len(ctx.history) == len(history)
        assert ctx.history[-1].text == history[-1].body
    warm.close()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("system", "a block outside history changed"),
        ("older", "a block inside history changed"),
        ("budget", "another budget"),
        ("verbose", "a verbose report lists every block"),
        ("big", "a tool result over its cap is cut"),
        ("tight", "it does not fit whole"),
        ("capped", "a new block has a cap of its own (0 is one)"),
    ],
)
def test_what_the_grown_path_cannot_make_takes_the_full_pipeline(change: str, why: str) -> None:
    warm, blocks, history = _session()
    warm.assemble(warm.request("q"))
    system = blocks["now"][0]
    kw: dict[str, Any] = {}
    if change == "system":
        system = Block.text("rules", "workspace", "Be very brief.", trusted=True)
    elif change == "older":
        history = [Block.text("t0u", "session", "changed", role="user", group="t0"), *history[1:]]
    history = history + _turn(40, 20, tool=20_000 if change == "big" else 0)
    if change == "capped":
        history[-1] = Block.text("t40a", "session", "ok", role="assistant", max_tokens=0)
    blocks["now"] = [system, *history]
    request = warm.request("next", max_tokens={"budget": 90_000, "tight": 1500}.get(change))
    if change == "verbose":
        kw["verbose_report"] = True
    ctx = warm.assemble(request, **kw)
    assert "grown" not in ctx.report.timings_ms, why
    fresh = make_assembler(LARGE, plugins=[("f", StaticProvider(list(blocks["now"])))])
    assert _strip(ctx) == _strip(fresh.assemble(request, **kw))
    if change in ("big", "tight", "capped"):
        assert ctx.report.dropped or any(b.status != "kept" for b in ctx.report.blocks)
    fresh.close()
    warm.close()


def test_a_grown_call_keeps_one_copy_of_the_blocks_gather_kept() -> None:
    """What the next call grows from holds gather's copy of each provider's blocks, not
    another list."""
    warm, blocks, history = _session()
    for n in range(40, 45):
        history = history + _turn(n, 20)
        blocks["now"] = [blocks["now"][0], *history]
        warm.assemble(warm.request(f"q{n}"))
    (layout,) = warm._layouts._layouts.values()
    assert layout.whole is not None
    for key, _kind, kept in layout.whole.runs:
        assert kept is layout.checked[key].blocks
    warm.close()

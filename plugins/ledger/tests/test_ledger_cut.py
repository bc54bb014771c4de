"""Where compaction cuts: never between a tool call and its result, never into the newest
``minimum_turns`` turns, and as late as needed to fit (keeping as much as fits)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from lamina_ledger.compaction import choose_cut, valid_cuts
from lamina_ledger.records import Turn

from lamina import Message, ToolCallPart, ToolResultPart


def turn(i: int, calls: list[str], results: list[str]) -> Turn:
    msgs = [Message.of("user", f"t{i}")]
    msgs += [Message(role="assistant", content=(ToolCallPart(id=c, name="x"),)) for c in calls]
    msgs += [
        Message(role="tool", content=(ToolResultPart(call_id=r, content="r"),)) for r in results
    ]
    return Turn(id=f"t{i}", type="normal", parent_id=None, thread_id="th", messages=tuple(msgs))


def test_valid_cuts_by_hand() -> None:
    turns = [turn(0, ["a"], []), turn(1, [], []), turn(2, [], ["a"]), turn(3, [], [])]
    # cutting before turn 1 or 2 would separate call "a" (turn 0) from its result (turn 2)
    assert valid_cuts(turns) == [True, False, False, True, True]


def test_choose_cut_by_hand() -> None:
    sizes = [100, 100, 100, 100, 100]
    ok = [True] * 6
    assert choose_cut(sizes, ok, 250, 1) == 3  # keep the last 2 (200 <= 250)
    assert choose_cut(sizes, ok, 250, 3) == 2  # but never fewer than 3
    assert choose_cut(sizes, ok, 1000, 0) == 1  # always summarize at least one turn
    assert choose_cut(sizes, [True, False, False, False, True, True], 250, 1) == 4
    assert choose_cut([100], [True, True], 0, 1) is None


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[Turn], list[int]]:
    n = draw(st.integers(min_value=1, max_value=14))
    calls: dict[int, list[str]] = {i: [] for i in range(n)}
    results: dict[int, list[str]] = {i: [] for i in range(n)}
    for c in range(draw(st.integers(min_value=0, max_value=6))):
        i = draw(st.integers(min_value=0, max_value=n - 1))
        j = draw(st.integers(min_value=i, max_value=n - 1))
        calls[i].append(f"c{c}")
        results[j].append(f"c{c}")
    sizes = draw(st.lists(st.integers(min_value=1, max_value=500), min_size=n, max_size=n))
    return [turn(i, calls[i], results[i]) for i in range(n)], sizes


@given(
    conversations(), st.integers(min_value=0, max_value=3000), st.integers(min_value=0, max_value=5)
)
def test_cut_never_orphans_and_keeps_minimum(
    conv: tuple[list[Turn], list[int]], budget: int, minimum: int
) -> None:
    turns, sizes = conv
    k = choose_cut(sizes, valid_cuts(turns), budget, minimum)
    if k is None:
        return
    assert 1 <= k <= len(turns) - min(minimum, len(turns))
    kept = turns[k:]
    have = {
        p.id for t in kept for m in t.messages for p in m.content if isinstance(p, ToolCallPart)
    }
    need = {
        p.call_id
        for t in kept
        for m in t.messages
        for p in m.content
        if isinstance(p, ToolResultPart)
    }
    assert need <= have
    gone = turns[:k]
    called = {
        p.id for t in gone for m in t.messages for p in m.content if isinstance(p, ToolCallPart)
    }
    assert not called & need
    if sum(sizes[k:]) > budget:  # over budget only when no valid, allowed cut fits
        ok = valid_cuts(turns)
        last = len(turns) - min(minimum, len(turns))
        assert all(not ok[j] for j in range(k + 1, last + 1))

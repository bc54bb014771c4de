"""History fit strategies: protected tail kept, budget met, gaps paid for, errors when not."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.builtins import truncators_plugin
from lamina.errors import BudgetError
from lamina.fitting_strategies import rolling_window, stop_at_limit, truncate_middle
from lamina.records import HistoryCut

Select = Callable[[Sequence[int], int, int, int], HistoryCut]

sizes_st = st.lists(st.integers(min_value=0, max_value=60), max_size=14)
budget_st = st.integers(min_value=-3, max_value=400)
protected_st = st.integers(min_value=-1, max_value=16)
marker_st = st.integers(min_value=0, max_value=12)


def gaps(keep: Sequence[int], count: int) -> int:
    """Maximal runs of dropped indices in ``range(count)``."""
    kept = set(keep)
    return sum(1 for i in range(count) if i not in kept and (i == 0 or i - 1 in kept))


def total(sizes: Sequence[int], keep: Sequence[int], marker: int) -> int:
    return sum(sizes[i] for i in keep) + marker * gaps(keep, len(sizes))


def must_raise(sizes: Sequence[int], budget: int, protected: int, marker: int) -> bool:
    """Not everything fits, and the protected tail plus one marker does not fit either."""
    p = min(max(protected, 0), len(sizes))
    tail = sum(sizes[len(sizes) - p :])
    return sum(sizes) > budget and tail + (marker if p < len(sizes) else 0) > budget


def _check_common(
    select: Select, sizes: list[int], budget: int, protected: int, marker: int
) -> HistoryCut | None:
    if must_raise(sizes, budget, protected, marker):
        with pytest.raises(BudgetError) as info:
            select(sizes, budget, protected, marker)
        err = info.value
        assert err.available == budget
        assert err.overage > 0
        assert f"{err.overage} tokens over" in str(err)
        return None
    cut = select(sizes, budget, protected, marker)
    keep = cut.keep
    assert list(keep) == sorted(set(keep))
    assert all(0 <= i < len(sizes) for i in keep)
    p = min(max(protected, 0), len(sizes))
    assert set(range(len(sizes) - p, len(sizes))) <= set(keep)
    assert total(sizes, keep, marker) <= budget
    if sum(sizes) <= budget:
        assert keep == tuple(range(len(sizes)))
    assert select(list(sizes), budget, protected, marker) == cut  # deterministic
    return cut


@settings(max_examples=300, deadline=None)
@given(sizes=sizes_st, budget=budget_st, protected=protected_st, marker=marker_st)
def test_rolling_window(sizes: list[int], budget: int, protected: int, marker: int) -> None:
    cut = _check_common(rolling_window, sizes, budget, protected, marker)
    if cut is None or not sizes:
        return
    keep = cut.keep
    start = keep[0] if keep else len(sizes)
    assert keep == tuple(range(start, len(sizes)))  # a contiguous newest run
    if start > 0:  # maximal: the next older group would not fit
        assert total(sizes, range(start - 1, len(sizes)), marker) > budget


@settings(max_examples=300, deadline=None)
@given(sizes=sizes_st, budget=budget_st, protected=protected_st, marker=marker_st)
def test_truncate_middle(sizes: list[int], budget: int, protected: int, marker: int) -> None:
    cut = _check_common(truncate_middle, sizes, budget, protected, marker)
    if cut is None:
        return
    keep = cut.keep
    assert gaps(keep, len(sizes)) <= 1
    dropped = [i for i in range(len(sizes)) if i not in keep]
    if dropped:  # maximal: neither group at the edges of the gap can be added back
        for edge in {dropped[0], dropped[-1]}:
            assert total(sizes, sorted([*keep, edge]), marker) > budget


@settings(max_examples=200, deadline=None)
@given(sizes=sizes_st, budget=budget_st, protected=protected_st, marker=marker_st)
def test_stop_at_limit(sizes: list[int], budget: int, protected: int, marker: int) -> None:
    if sum(sizes) <= budget:
        assert stop_at_limit(sizes, budget, protected, marker).keep == tuple(range(len(sizes)))
        return
    with pytest.raises(BudgetError) as info:
        stop_at_limit(sizes, budget, protected, marker)
    assert info.value.overage == sum(sizes) - budget
    assert info.value.available == budget


@pytest.mark.parametrize(
    ("sizes", "budget", "protected", "marker", "keep"),
    [
        # head takes half of the 40 left (0, 1), the tail the rest (4, 5)
        ([10] * 8, 61, 2, 1, (0, 1, 4, 5, 6, 7)),
        # group 0 is over half: head empty, the tail fills
        ([30, 5, 5, 5, 5, 40, 10], 60, 1, 0, (3, 4, 5, 6)),
        # the head grows into what the tail could not use
        ([20, 20, 50, 5, 10], 60, 1, 2, (0, 1, 3, 4)),
        # everything fits: no gap, no marker
        ([5, 5, 5], 15, 1, 100, (0, 1, 2)),
        # only the protected tail fits beside the marker
        ([50, 50, 50, 10], 15, 1, 5, (3,)),
        # nothing protected and nothing fits: everything dropped, one marker
        ([50, 50], 5, 0, 5, ()),
    ],
)
def test_truncate_middle_examples(
    sizes: list[int], budget: int, protected: int, marker: int, keep: tuple[int, ...]
) -> None:
    assert truncate_middle(sizes, budget, protected, marker).keep == keep


@pytest.mark.parametrize(
    ("sizes", "budget", "protected", "marker", "keep"),
    [
        ([10] * 8, 61, 2, 1, (2, 3, 4, 5, 6, 7)),
        # stops at the first group that does not fit, even if an older one would
        ([1, 50, 10, 10], 40, 1, 2, (2, 3)),
        ([5, 5, 5], 15, 3, 100, (0, 1, 2)),
    ],
)
def test_rolling_window_examples(
    sizes: list[int], budget: int, protected: int, marker: int, keep: tuple[int, ...]
) -> None:
    assert rolling_window(sizes, budget, protected, marker).keep == keep


@pytest.mark.parametrize("select", [rolling_window, truncate_middle])
def test_protected_over_budget_raises(select: Select) -> None:
    with pytest.raises(BudgetError, match="7 tokens over") as info:
        select([10, 20, 30], 45, 2, 2)  # 50 + marker 2 = 52 > 45
    assert (info.value.overage, info.value.available) == (7, 45)


def test_stop_at_limit_message() -> None:
    with pytest.raises(BudgetError) as info:
        stop_at_limit([10, 20, 30], 35, 1, 0)
    message = str(info.value)
    assert "25 over" in message
    assert "2 of 3 groups (30 tokens)" in message
    assert (info.value.overage, info.value.available) == (25, 35)


def test_negative_sizes_are_rejected() -> None:
    with pytest.raises(ValueError):
        truncate_middle([1, -1], 10, 0, 0)


def test_fit_strategy_records() -> None:
    records = {r.name: r for r in truncators_plugin.lamina_fit_strategies()}
    assert list(records) == ["truncateMiddle", "rollingWindow", "stopAtLimit"]
    assert records["truncateMiddle"].select is truncate_middle
    assert records["rollingWindow"].select is rolling_window
    assert records["stopAtLimit"].select is stop_at_limit
    assert (records["rollingWindow"].marks_gaps, records["stopAtLimit"].marks_gaps) == (
        True,
        False,
    )
    assert all(r.description for r in records.values())

"""The history fit strategies of the Loom design: which groups (turns) to keep within a budget.

Each has the ``FitStrategy.select`` signature: ``sizes`` are group tokens oldest first, the
newest ``protected`` groups always stay, and each gap (a maximal run of dropped groups) costs
``marker_tokens``. The kept groups plus their markers never exceed ``budget``.
"""

from __future__ import annotations

from collections.abc import Sequence

from lamina.errors import BudgetError
from lamina.records import HistoryCut

__all__ = ["rolling_window", "stop_at_limit", "truncate_middle"]


def _check(sizes: Sequence[int], budget: int, protected: int, marker_tokens: int) -> int:
    """Validate the inputs and return how many of the newest groups are protected."""
    if marker_tokens < 0 or min(sizes, default=0) < 0:
        raise ValueError("group sizes and marker_tokens must be non-negative")
    return min(max(protected, 0), len(sizes))


def _require_protected(sizes: Sequence[int], budget: int, kept: int, marker_tokens: int) -> int:
    """Tokens left once the protected tail and the one gap marker before it are paid for;
    raises ``BudgetError`` when that is already over ``budget``."""
    count = len(sizes)
    needed = sum(sizes[count - kept :]) + (marker_tokens if kept < count else 0)
    if needed > budget:
        raise BudgetError(
            f"history: the newest {kept} protected group(s) need {needed} tokens "
            f"(gap marker included) but only {budget} are available: {needed - budget} tokens over",
            overage=needed - budget,
            available=budget,
        )
    return budget - needed


def rolling_window(
    sizes: Sequence[int], budget: int, protected: int, marker_tokens: int
) -> HistoryCut:
    """Keep the newest groups that fit contiguously, dropping the oldest first (one gap at
    the start when anything is dropped)."""
    count = len(sizes)
    kept = _check(sizes, budget, protected, marker_tokens)
    if sum(sizes) <= budget:
        return HistoryCut(keep=tuple(range(count)))
    left = _require_protected(sizes, budget, kept, marker_tokens)
    start = count - kept
    while start > 0 and sizes[start - 1] <= left:
        start -= 1
        left -= sizes[start]
    return HistoryCut(keep=tuple(range(start, count)))


def truncate_middle(
    sizes: Sequence[int], budget: int, protected: int, marker_tokens: int
) -> HistoryCut:
    """Keep the oldest and the newest groups and drop from the middle (one gap).

    After the protected tail and the marker, the head (oldest groups, contiguous) takes up to
    half the remaining tokens (rounded down), the tail (newest unprotected groups, going back)
    takes what is left, and then the head may grow into whatever the tail could not use.
    """
    count = len(sizes)
    kept = _check(sizes, budget, protected, marker_tokens)
    if sum(sizes) <= budget:
        return HistoryCut(keep=tuple(range(count)))
    left = _require_protected(sizes, budget, kept, marker_tokens)

    head = 0  # groups [0, head) are kept
    tail = count - kept  # groups [tail, count) are kept
    head_share = left // 2
    while head < tail and sizes[head] <= head_share:
        head_share -= sizes[head]
        left -= sizes[head]
        head += 1
    while tail > head and sizes[tail - 1] <= left:
        tail -= 1
        left -= sizes[tail]
    while head < tail and sizes[head] <= left:
        left -= sizes[head]
        head += 1
    return HistoryCut(keep=(*range(head), *range(tail, count)))


def stop_at_limit(
    sizes: Sequence[int], budget: int, protected: int, marker_tokens: int
) -> HistoryCut:
    """Keep everything or refuse: raises ``BudgetError`` saying how many of the oldest groups
    (and tokens) would have to go."""
    _check(sizes, budget, protected, marker_tokens)
    total = sum(sizes)
    if total <= budget:
        return HistoryCut(keep=tuple(range(len(sizes))))
    dropped = dropped_tokens = 0
    while dropped < len(sizes) and total - dropped_tokens > budget:
        dropped_tokens += sizes[dropped]
        dropped += 1
    raise BudgetError(
        f"history needs {total} tokens but only {budget} are available ({total - budget} over); "
        f"stopAtLimit does not cut, and fitting would drop the oldest {dropped} of "
        f"{len(sizes)} groups ({dropped_tokens} tokens)",
        overage=total - budget,
        available=budget,
    )

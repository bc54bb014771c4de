"""Making a history cut: marking the groups the strategy did not keep as dropped.

``full`` marks every item of every dropped group. ``shifted`` starts from the stream's
previous cut, whose items were left dropped between the calls, when the history it was made
on is the start of this one (the same groups, perhaps a longer last group, then new ones):
only the groups whose fate changed are marked or put back, so a session that grew by a turn
costs what changed, not what was dropped long ago. Both give the same items the same state.
"""

from __future__ import annotations

from lamina.assembly.state import ORIGINAL, Cut, Item

#: The reason every item of a history cut carries.
REASON = "history cut by {name}"


def full(
    layer: str, groups: list[list[Item]], keep: tuple[int, ...], name: str, marking: bool
) -> Cut:
    """The cut keeping ``keep``: every item of every other group marked dropped."""
    reason = REASON.format(name=name)
    kept = set(keep)
    dropped: list[Item] = []
    gaps: list[tuple[int, Item]] = []
    gap: list[Item] = []
    for n, group in enumerate(groups):
        if n in kept:
            if gap:
                gaps.append((len(gap), group[0]))
                dropped += gap
                gap = []
            continue
        _drop(group, name, reason)
        gap += group
    if gap:
        gaps.append((len(gap), gap[-1]))
        dropped += gap
    return Cut(
        layer=layer,
        count=len(dropped),
        original=sum(map(ORIGINAL, dropped)),
        first=dropped[0],
        last=dropped[-1],
        items=dropped,
        groups=groups,
        keep=keep,
        strategy=name,
        marking=marking,
        gaps=gaps,
    )


def shifted(
    previous: Cut,
    layer: str,
    groups: list[list[Item]],
    keep: tuple[int, ...],
    name: str,
    marking: bool,
    totals: tuple[int, int],
) -> Cut | None:
    """The cut keeping ``keep``, made from ``previous`` (whose items are still dropped) by
    changing only the groups whose fate differs; ``None`` when ``previous`` was made on
    another history or by another strategy. ``totals`` are the items and original tokens of
    all of ``groups``."""
    old = previous.groups
    if old is None or previous.strategy != name or not _extends(groups, old):
        return None
    order = sorted(set(keep))
    count, original = totals
    for n in order:
        count -= len(groups[n])
        original -= sum(map(ORIGINAL, groups[n]))
    if count <= 0:
        return None  # nothing dropped: not a cut
    reason = REASON.format(name=name)
    was, now = set(previous.keep), set(keep)
    m = len(old)
    for n in was - now:  # kept before, dropped now (with what joined it since)
        _drop(groups[n], name, reason)
    for n in now - was:  # dropped before, kept now
        if n < m:
            for item in groups[n]:
                item.reset()
    if m - 1 not in was and m - 1 not in now and len(groups[m - 1]) > len(old[m - 1]):
        _drop(groups[m - 1][len(old[m - 1]) :], name, reason)  # a dropped group grew
    for n in range(m, len(groups)):
        if n not in now:
            _drop(groups[n], name, reason)
    return Cut(
        layer=layer,
        count=count,
        original=original,
        first=groups[_first_gone(order)][0],
        last=groups[_last_gone(order, len(groups))][-1],
        groups=groups,
        keep=keep,
        strategy=name,
        marking=marking,
        gaps=_gaps(groups, order),
    )


def _extends(groups: list[list[Item]], old: list[list[Item]]) -> bool:
    """Whether ``groups`` begin with ``old`` (whose last group may have grown)."""
    m = len(old)
    if groups is old:
        return True
    if len(groups) < m or m == 0:
        return False
    last = old[-1]
    return groups[: m - 1] == old[: m - 1] and groups[m - 1][: len(last)] == last


def _drop(items: list[Item], name: str, reason: str) -> None:
    for item in items:
        item.status = "dropped"
        item.strategy = name
        item.reason = reason
        item.tokens = item.framing = 0


def _first_gone(order: list[int]) -> int:
    """The first group index not in ``order`` (sorted)."""
    for n, k in enumerate(order):
        if n != k:
            return n
    return len(order)


def _last_gone(order: list[int], size: int) -> int:
    """The last group index below ``size`` not in ``order`` (sorted)."""
    n = size - 1
    for k in reversed(order):
        if k != n:
            return n
        n -= 1
    return n


def _gaps(groups: list[list[Item]], order: list[int]) -> list[tuple[int, Item]]:
    """Each run of dropped groups: how many items, and the item its marker sorts before
    (the first kept one after it, else the run's last)."""
    gaps = []
    start = 0
    for k in order:
        if k > start:
            gaps.append((sum(map(len, groups[start:k])), groups[k][0]))
        start = k + 1
    if start < len(groups):
        gaps.append((sum(map(len, groups[start:])), groups[-1][-1]))
    return gaps

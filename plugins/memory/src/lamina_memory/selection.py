"""The weighted score and greedy selection within a budget: each source fills its share, the
rest goes to the best leftovers, and what did not fit is kept for compression."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from attrs import evolve, field, frozen

from lamina_memory.query import SECTION_ORDER
from lamina_memory.records import Candidate


def score(c: Candidate, weights: tuple[float, float, float]) -> float:
    """The weighted final score: recency, relevance, salience (weights sum to 1)."""
    w_rec, w_rel, w_sal = weights
    return w_rec * c.recency + w_rel * c.relevance + w_sal * c.salience


@frozen(kw_only=True)
class Selection:
    """What fits (in injection order) and what did not (best first)."""

    chosen: tuple[Candidate, ...]
    overflow: tuple[Candidate, ...]
    used: int
    budget: int
    #: Candidates each source proposed, and the chunks the semantic search ran over.
    considered: Mapping[str, int] = field(factory=dict)
    searched: int = 0


def select(
    candidates: dict[str, list[Candidate]],
    *,
    budget: int,
    shares: dict[str, float],
    weights: tuple[float, float, float],
    cost: Callable[[Candidate, bool], int],
) -> Selection:
    """Greedy selection: each source first fills its share (best score first, skipping what
    does not fit), then the remaining budget goes to the best leftovers of any source.

    ``cost(candidate, first_in_section)`` is the candidate's rendered size in tokens (the
    section title is charged to the first item of a section).
    """
    points = {c.key: score(c, weights) for cands in candidates.values() for c in cands}
    scored = {
        src: sorted(cands, key=lambda c: (-points[c.key], c.key))
        for src, cands in candidates.items()
    }
    taken: dict[str, Candidate] = {}
    sections: set[str] = set()
    used = 0

    def take(c: Candidate, limit: int) -> int:
        first = c.section not in sections
        t = cost(c, first)
        if used + t > budget or t > limit:
            return 0
        taken[c.key] = evolve(c, score=points[c.key], tokens=t)
        sections.add(c.section)
        return t

    total_share = sum(shares.get(s, 0.0) for s in scored) or 1.0
    for src, cands in scored.items():
        allowance = int(budget * shares.get(src, 0.0) / total_share)
        spent = 0
        for c in cands:
            if c.key in taken:
                continue
            t = take(c, allowance - spent)
            spent += t
            used += t
    pool = sorted(
        (c for cands in scored.values() for c in cands if c.key not in taken),
        key=lambda c: (-points[c.key], c.key),
    )
    overflow = []
    for c in pool:
        if c.key in taken:
            continue
        if budget - used <= 0:
            overflow.append(c)
            continue
        t = take(c, budget - used)
        if t:
            used += t
        else:
            overflow.append(c)
    order = {name: i for i, name in enumerate(SECTION_ORDER)}
    chosen = sorted(taken.values(), key=lambda c: (order.get(c.section, 99), -c.score, c.key))
    return Selection(chosen=tuple(chosen), overflow=tuple(overflow), used=used, budget=budget)

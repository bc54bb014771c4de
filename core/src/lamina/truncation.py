"""Text truncation on token boundaries, guaranteed to fit the token limit exactly.

BPE is not prefix-stable (a cut can re-merge into more or fewer tokens), so each candidate is
re-counted; a search over the number of kept tokens, guided by each count and bisecting when
the guesses do not settle, keeps that to a few counts and never more than O(log n).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lamina.records import Tokenizer

__all__ = [
    "END_MARKER",
    "MIDDLE_MARKER",
    "START_MARKER",
    "truncate_end",
    "truncate_middle",
    "truncate_never",
    "truncate_start",
]

#: Appended after the kept beginning by ``truncate_end``.
END_MARKER = "\n[… truncated]"
#: Put before the kept end by ``truncate_start``.
START_MARKER = "[truncated …]\n"
#: Joins the kept head and tail in ``truncate_middle``.
MIDDLE_MARKER = "\n[… truncated …]\n"
#: Probes placed by the last count's distance from the limit before the search bisects.
_GUESSES = 6


def _fit(
    text: str,
    max_tokens: int,
    tokenizer: Tokenizer,
    fewest: Callable[[Sequence[int]], int],
    build: Callable[[Sequence[int], int], str],
) -> str | None:
    """``text`` if it fits, else the candidate ``build(bounds, kept)`` with the most kept
    tokens whose re-counted size fits, or ``None`` when not even ``fewest(bounds)`` fits.

    ``fewest`` is the least ``kept`` that keeps a non-empty part of ``text`` (a character
    spread over several tokens needs all of them); ``kept`` stays below ``len(bounds)``.
    """
    if tokenizer.count(text) <= max_tokens:
        return text
    bounds = tokenizer.boundaries(text)
    best: str | None = None
    # Invariant: candidate ``lo`` fits (or lo is below ``fewest``); candidate ``hi`` does not
    # (or hi is the whole text). If nothing fits, ``fewest`` itself is the last one probed.
    lo, hi = fewest(bounds) - 1, len(bounds)
    # A candidate's count says how far off it is, so the next probe is that many tokens away
    # (a long text is counted a few times, not log n); after ``_GUESSES`` guesses, bisect.
    probe, guesses = max_tokens, 0
    while hi - lo > 1:
        mid = probe if lo < probe < hi and guesses < _GUESSES else (lo + hi) // 2
        candidate = build(bounds, mid)
        tokens = tokenizer.count(candidate)
        if tokens <= max_tokens:
            lo, best = mid, candidate
            probe = mid + max(1, max_tokens - tokens)
        else:
            hi = mid
            probe = mid - max(1, tokens - max_tokens)
        guesses += 1
    return best


def _first_cut(bounds: Sequence[int]) -> int:
    """Index of the first token starting after offset 0: the fewest tokens a prefix can keep
    (looked for from the start: a long text's offsets are computed as they are read)."""
    first = 0
    while first < len(bounds) and bounds[first] <= 0:
        first += 1
    return first


def truncate_never(text: str, max_tokens: int, tokenizer: Tokenizer) -> str | None:
    """``text`` unchanged if it fits, else ``None`` (the block may not be cut)."""
    return text if tokenizer.count(text) <= max_tokens else None


def truncate_end(text: str, max_tokens: int, tokenizer: Tokenizer) -> str | None:
    """Keep the beginning of ``text`` and append ``END_MARKER``."""

    def build(bounds: Sequence[int], kept: int) -> str:
        return text[: bounds[kept]] + END_MARKER

    return _fit(text, max_tokens, tokenizer, _first_cut, build)


def truncate_start(text: str, max_tokens: int, tokenizer: Tokenizer) -> str | None:
    """Keep the end of ``text`` behind ``START_MARKER``."""

    def build(bounds: Sequence[int], kept: int) -> str:
        return START_MARKER + text[bounds[len(bounds) - kept] :]

    return _fit(text, max_tokens, tokenizer, lambda bounds: 1, build)


def truncate_middle(text: str, max_tokens: int, tokenizer: Tokenizer) -> str | None:
    """Keep the head and the tail of ``text`` (the head gets the odd token) around
    ``MIDDLE_MARKER``."""

    def build(bounds: Sequence[int], kept: int) -> str:
        tail_tokens = kept // 2
        head = text[: bounds[kept - tail_tokens]]
        tail = text[bounds[len(bounds) - tail_tokens] :] if tail_tokens else ""
        return head + MIDDLE_MARKER + tail

    # One kept token is a head of one token; from two on the tail is never empty.
    return _fit(text, max_tokens, tokenizer, lambda bounds: min(_first_cut(bounds), 2), build)

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
    "longest_fitting",
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


def longest_fitting(
    tokens_at: Callable[[int], int], limit: int, *, fits: int, fails: int, guess: int
) -> int:
    """The largest ``k`` between ``fits`` and ``fails`` whose candidate (``tokens_at(k)``
    tokens) is within ``limit``, or ``fits`` when none is. ``fits``: a ``k`` known to fit, or
    just below the least worth trying; ``fails``: one known not to, or just past the last;
    fitting stops once as ``k`` grows.

    For cuts that must be counted whole (BPE is not prefix-stable: a cut can re-merge into
    more or fewer tokens). A candidate's count says how far off it is, so the next try is that
    many away, starting at ``guess``: a close guess takes two or three counts. After
    ``_GUESSES`` such tries it bisects, so never more than O(log n). The truncators here and
    Loom's buffer mode cut with it."""
    lo, hi, probe = fits, fails, guess
    for _ in range(_GUESSES):
        probe = min(max(probe, lo + 1), hi - 1)
        if not lo < probe < hi:
            return lo
        tokens = tokens_at(probe)
        if tokens <= limit:
            lo, probe = probe, probe + max(1, limit - tokens)
        else:
            hi, probe = probe, probe - max(1, tokens - limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tokens_at(mid) <= limit:
            lo = mid
        else:
            hi = mid
    return lo


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
    best: str | None = None  # the candidate of the largest ``kept`` that fit so far

    def tokens_at(kept: int) -> int:
        nonlocal best
        candidate = build(bounds, kept)
        tokens = tokenizer.count(candidate)
        if tokens <= max_tokens:  # (the search only tries a larger ``kept`` after a fit)
            best = candidate
        return tokens

    least = fewest(bounds)
    kept = longest_fitting(
        tokens_at, max_tokens, fits=least - 1, fails=len(bounds), guess=max_tokens
    )
    return best if kept >= least else None


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

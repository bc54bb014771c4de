"""Where two texts joined count as the sum of their counts, so a joined text (the current
message: the event's time lines, a separator, the event's content) is not tokenized again.

tiktoken cuts text with its encoding's regex and applies BPE to each piece alone, so
``count(left + right) == count(left) + count(right)`` whenever the pieces of the joined text
are the pieces of ``left`` followed by those of ``right``. For o200k_base and cl100k_base that
holds when ``left`` ends with a line break and ``right`` starts with anything but white space,
a line break or ``/``: the piece that ends ``left`` (a run of white space up to its last line
break, or punctuation followed by line breaks) can grow only by white space, line breaks or
``/``, no piece looks behind itself, and the only look-ahead (white space before
non-space) cannot reach past a line break into ``right``. core/tests/test_joins.py checks it
against tiktoken for every character of the Basic Multilingual Plane as ``right`` 's first,
and on random texts.
"""

from __future__ import annotations

from collections.abc import Callable

from lamina.blank_runs import ORDINARY_LIMIT

__all__ = ["SPLIT_ENCODINGS", "splits_between"]

#: The tiktoken encodings whose split pattern is known to end a piece at a line break that
#: is followed by ``right`` as above.
SPLIT_ENCODINGS = frozenset({"o200k_base", "cl100k_base"})


def _after_line_break(left: str, right: str) -> bool:
    # A joined text of ``ORDINARY_LIMIT`` characters or more is counted another way, which
    # the proof does not cover: counted whole.
    if not right or not left.endswith("\n") or len(left) + len(right) >= ORDINARY_LIMIT:
        return False
    first = right[0]
    return not first.isspace() and first != "/"


def splits_between(encoding: str | None) -> Callable[[str, str], bool] | None:
    """For a tiktoken ``encoding``: a test of whether ``left + right`` counts as ``left`` 's
    count plus ``right`` 's; ``None`` when that is not known (another encoding, or not a
    tiktoken tokenizer: ``None``), and a joined text is then counted whole."""
    return _after_line_break if encoding in SPLIT_ENCODINGS else None

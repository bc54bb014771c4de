"""Text tiktoken's regex cannot split: long runs of blanks, cut out and encoded apart, with
the same tokens as encoding the text whole (``lamina.tokens`` uses it; re-exported there)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

__all__ = ["BLANKS", "BLANK_RUN", "CUTTABLE", "ORDINARY_LIMIT", "Segment", "cut_blank_runs"]

# -- text tiktoken's regex cannot split -------------------------------------------------------
# A run of about a million blanks overflows the backtracking of the patterns' ``\s+(?!\S)``
# ("Max stack size exceeded"). Why cutting such a run out is exact, for R = text[a:b] a maximal
# run of blanks (``\s`` but not CR or LF), b - a >= 2, followed by a character outside ``\s``:
# no alternative of either pattern takes a blank except as the first character of a piece or
# in a whitespace piece, and a whitespace piece that starts before R ends at the newline before
# it; so a piece starts at a, and there only ``\s+(?!\S)`` matches, giving text[a:b-1] (o200k
# also at the end of the text, giving text[a:b]; cl100k's ``\s++$`` may start earlier, so no
# cut there). Ending the text at a changes only what whitespace alternatives see at a, and the
# piece before still ends at that newline; text[b-1:] is matched as from a fresh start (no
# look-behind). So text[:a], the piece and text[b-1:] encoded apart give tiktoken's tokens.

#: Unicode White_Space without CR and LF, the blanks of the patterns' ``\s``, as the inside
#: of a regular expression's character class (``\u2000-\u200a`` is a range).
BLANKS = "\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: Runs of blanks at least this long are cut out when tiktoken cannot encode a text.
BLANK_RUN = 4096
#: Texts shorter than this hold no blank run the regex fails on (a quarter of the shortest):
#: tokenizers count them on tiktoken's ordinary path, longer ones another way.
ORDINARY_LIMIT = 250_000
#: sha256 of each pattern the reasoning above holds for, and whether a run ending the text
#: is a piece of its own.
CUTTABLE = {
    "2d1b8dc11e89af71459b36004f698ab3693f59fd84f63e8ec2b49564ab857420": True,  # o200k_base
    "f021c3d976978e62ee64cdad150cc3405c2e3d6e3b40407850bb9e8d9eb65899": False,  # cl100k_base
}
#: Tokens of one stretch of text: token ids, or UTF-8 bytes charged one token each.
Segment = list[int] | bytes


@functools.cache
def _blank_runs(run: int) -> re.Pattern[str]:
    return re.compile(f"(?<![{BLANKS}])[{BLANKS}]{{{max(run, 2)},}}")


def cut_blank_runs(
    text: str,
    encode: Callable[[str], Segment],
    piece: Callable[[str], list[int]],
    *,
    at_end: bool,
    run: int = BLANK_RUN,
) -> list[Segment]:
    """The tokens of ``text`` with every run of at least ``run`` blanks followed by a
    non-space (or ending the text, when ``at_end``) encoded as its own ``piece``, and the rest
    by ``encode``: the same tokens as encoding it whole (see above)."""
    segments: list[Segment] = []
    start = 0
    for found in _blank_runs(run).finditer(text):
        a, b = found.span()
        if b < len(text) and text[b] not in "\r\n":
            end = b - 1
        elif b == len(text) and at_end:
            end = b
        else:
            continue
        segments += [encode(text[start:a]), piece(text[a:end])]
        start = end
    segments.append(encode(text[start:]))
    return segments

"""Escaping helpers the formatters use so block content stays data: it cannot close, open or
forge the tags and fences that surround it, and is otherwise shown exactly as written (a
model shown ``&lt;`` where the file says ``<`` quotes, edits and reasons about text that is
not there)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

#: The tags the xml formatter wraps blocks in (the working-set protocol's roles and the
#: defaults); a body may not open or close any of them, nor its own block's tag.
WRAPPER_TAGS: frozenset[str] = frozenset({"system", "developer", "user", "context", "block"})
# Where a wrapper tag's name ends: the next character cannot continue an XML name.
_NAME_END = r"(?![\w.:-])"
_ATTR_ESCAPES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "\n": "&#10;",
    "\r": "&#13;",
    "\t": "&#9;",
}
_ATTR_SPECIAL = re.compile('[&<>"\n\r\t]')
_TAG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_BACKTICK_RUN = re.compile(r"`+")
# A run of blanks holding a line break, matched from its start only (never from inside a
# run, and with nothing to give back), so a megabyte of blanks is one pass, not its square.
_LINE_BREAKS = re.compile(r"(?<!\s)[^\S\r\n]*+[\r\n]\s*")


def _wrapper_names(tags: Iterable[str]) -> str:
    names = sorted({t.casefold() for t in (*WRAPPER_TAGS, *tags)}, key=lambda t: (-len(t), t))
    return "|".join(re.escape(t) for t in names)


def _tag(tags: Iterable[str]) -> str:
    """A wrapper tag's name after its ``<``: blanks and a ``/`` allowed first. The blanks are
    taken whole, never given back (giving some back cannot match otherwise, and retrying
    each split made a ``<`` before a megabyte of blanks cost the square of its length)."""
    return rf"\s*+/?\s*+(?:{_wrapper_names(tags)}){_NAME_END}"


@cache
def _patterns(tags: frozenset[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(escape, unescape) patterns for these wrapper tags (memoized: few distinct sets)."""
    # ``<`` (or an escaped one, ``&lt;`` behind any number of ``amp;``) that starts an opening
    # or closing wrapper tag, blanks allowed where a reader might still see one.
    tag = _tag(tags)
    escape = re.compile(rf"<(?={tag})|&(?=(?:amp;)*lt;{tag})", re.IGNORECASE)
    unescape = re.compile(rf"&lt;(?={tag})|&amp;(?=(?:amp;)*lt;{tag})", re.IGNORECASE)
    return escape, unescape


def escape_xml_text(s: str, tags: Iterable[str] = ()) -> str:
    """``s`` verbatim except where it would open or close a wrapper tag (``WRAPPER_TAGS``
    and ``tags``, any case, blanks allowed): that ``<`` becomes ``&lt;``, and the ``&`` of
    text that already reads ``&lt;`` + such a tag becomes ``&amp;``, so the escaping can be
    undone exactly. Code such as ``a < b && c``, ``<div>`` or ``config/<environment>.toml``
    reaches the model as written."""
    escape, _ = _patterns(frozenset(tags))
    return escape.sub(lambda m: "&lt;" if m.group() == "<" else "&amp;", s)


def unescape_xml_text(s: str, tags: Iterable[str] = ()) -> str:
    """Invert ``escape_xml_text`` for the same ``tags``
    (``unescape_xml_text(escape_xml_text(s, t), t) == s`` for any ``s``)."""
    _, unescape = _patterns(frozenset(tags))
    return unescape.sub(lambda m: "<" if m.group().casefold() == "&lt;" else "&", s)


def wrapper_tag_pattern(tags: Iterable[str] = ()) -> re.Pattern[str]:
    """What ``escape_xml_text`` never lets through: a ``<`` opening or closing a wrapper tag."""
    return re.compile(rf"<{_tag(tags)}", re.IGNORECASE)


def escape_xml_attr(s: str) -> str:
    """Escape a double-quoted attribute value fully; line breaks and tabs become character
    references so they survive attribute-value normalisation."""
    return _ATTR_SPECIAL.sub(lambda m: _ATTR_ESCAPES[m.group()], s)


def valid_tag_name(name: str) -> bool:
    """Whether ``name`` is a plain XML-like tag name (``[A-Za-z_][A-Za-z0-9_.-]*``)."""
    return _TAG_NAME.fullmatch(name) is not None


def markdown_fence(s: str) -> str:
    """Wrap ``s`` in a backtick fence longer than any backtick run inside it (at least three),
    so nothing in ``s`` can close the fence."""
    longest = max((len(run) for run in _BACKTICK_RUN.findall(s)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{s}\n{fence}"


def one_line(s: str) -> str:
    """``s`` with every line break (and the blanks around it) collapsed to one space, so it
    cannot start a new line of structure (a heading, a fence, a tag)."""
    if not s:  # most blocks have no title: no regular expression to run
        return s
    return _LINE_BREAKS.sub(" ", s).strip()

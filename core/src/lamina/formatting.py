"""Escaping helpers the formatters use so block content stays data: it cannot close, open or
forge the tags and fences that surround it."""

from __future__ import annotations

import re

# An ``&`` that starts something a reader could take for an entity or character reference.
_ENTITY_START = re.compile(r"&(?=[\w:][\w.:-]*;|#[0-9]+;|#[xX][0-9A-Fa-f]+;)")
# A ``<`` that could open or close a tag, a comment, a CDATA section or a processing
# instruction: before ``/ ! ? : _`` or any letter (XML names may start with non-ASCII ones).
_TAG_START = re.compile(r"<(?=[/!?:_]|[^\W\d])")
_UNESCAPE = re.compile(r"&(amp|lt);")
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
_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


def escape_xml_text(s: str) -> str:
    """Escape only the ``&`` and ``<`` that could start an entity or a tag, so code such as
    ``a < b && c`` stays readable while no tag, comment or CDATA can be opened or closed."""
    return _TAG_START.sub("&lt;", _ENTITY_START.sub("&amp;", s))


def unescape_xml_text(s: str) -> str:
    """Invert ``escape_xml_text`` (``unescape_xml_text(escape_xml_text(s)) == s`` for any ``s``)."""
    return _UNESCAPE.sub(lambda m: "&" if m.group(1) == "amp" else "<", s)


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
    return _LINE_BREAKS.sub(" ", s).strip()

"""The frame every Lamina page shares: one self-contained HTML document (inline style, no
script, nothing fetched: its Content-Security-Policy says so to the browser) and the escaping
of text that comes from content. Plugins reach both as ``lamina.html_page`` and
``lamina.html_escape``."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from lamina.html.style import BASE

#: What a page may load: nothing but its own inline style.
CSP = "default-src 'none'; style-src 'unsafe-inline'"

#: Characters a page must not carry as they are: controls (other than tab and line breaks) and
#: lone surrogates (not encodable). Shown as U+FFFD.
_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def html_escape(value: object) -> str:
    """Text or attribute value, escaped for HTML (``& < > " '``) with unsafe characters
    replaced."""
    return html.escape(_UNSAFE.sub("\ufffd", str(value)), quote=True)


def html_page(title: str, body: str | Sequence[str], *, style: str = "") -> str:
    """One self-contained page: ``title`` (escaped here), ``body`` (markup whose content is
    already escaped, e.g. by ``html_escape``) and the shared style sheet (type, headings,
    ``.summary``, ``.meta``, ``.hint``, ``.none``, ``.warning``, tables with ``th.n``/``td.n``
    number columns) followed by the page's own ``style``."""
    parts = [body] if isinstance(body, str) else list(body)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{html_escape(title)}</title>",
            f"<style>{BASE}{style}</style>",
            "</head>",
            "<body>",
            *parts,
            "</body>",
            "</html>",
            "",
        ]
    )

"""Lamina's pages: the assembly report as one self-contained HTML page (``lamina assemble
--format html``; no script, no network, every figure the report's own and readable from
``data-`` attributes), and the frame other pages share (``html_page``, ``html_escape``)."""

from __future__ import annotations

from lamina.html.page import esc, render_html
from lamina.html.shell import html_escape, html_page

__all__ = ["esc", "html_escape", "html_page", "render_html"]

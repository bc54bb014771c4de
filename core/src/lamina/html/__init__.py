"""The assembly report as one self-contained HTML page (``lamina assemble --format html``):
no script, no network, every figure the report's own and readable from ``data-`` attributes."""

from __future__ import annotations

from lamina.html.page import esc, render_html

__all__ = ["esc", "render_html"]

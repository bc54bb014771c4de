"""The built-in ``xml``, ``markdown`` and ``plain`` formatters.

Untrusted content is data: the xml formatter always escapes bodies, the markdown formatter
fences untrusted ones, so file, memory and tool text cannot close or forge structure.
"""

from __future__ import annotations

from collections.abc import Iterable

from lamina.formatting import (
    escape_xml_attr,
    escape_xml_text,
    markdown_fence,
    one_line,
    valid_tag_name,
)
from lamina.hookspecs import hookimpl
from lamina.model.blocks import Block
from lamina.records import Formatter


def render_xml(block: Block) -> str:
    """``<tag path="…" title="…">`` around the escaped body; the tag is the block's own, else
    ``context`` for a file, else ``block``. Even trusted bodies are escaped."""
    path = block.provenance.path
    tag = block.tag or ("context" if path else "block")
    if not valid_tag_name(tag):
        raise ValueError(f"block {block.id!r}: invalid xml tag name {tag!r}")
    attrs = "".join(
        f' {name}="{escape_xml_attr(value)}"'
        for name, value in (("path", path), ("title", block.title))
        if value
    )
    return f"<{tag}{attrs}>\n{escape_xml_text(block.body)}\n</{tag}>"


def render_markdown(block: Block) -> str:
    """A ``## title`` section; trusted bodies go in raw, untrusted ones are fenced and their
    path, if any, joins the heading."""
    title = one_line(block.title or "") or None
    if block.trusted:
        heading, body = title, block.body
    else:
        path = block.provenance.path
        where = one_line(path or "") or None
        heading = f"{title} ({where})" if title and where else (title or where)
        body = markdown_fence(block.body)
    return body if heading is None else f"## {heading}\n\n{body}"


def render_plain(block: Block) -> str:
    """The body as is, after the title on its own line when there is one."""
    title = one_line(block.title or "")
    return f"{title}\n{block.body}" if title else block.body


@hookimpl
def lamina_formatters() -> Iterable[Formatter]:
    """Supply the three built-in formatters."""
    return [
        Formatter(
            name="xml",
            render=render_xml,
            description="XML-like role tags (<system>, <context path=…>); bodies escaped.",
        ),
        Formatter(
            name="markdown",
            render=render_markdown,
            description="## sections; untrusted bodies fenced.",
        ),
        Formatter(name="plain", render=render_plain, description="Title line and raw body."),
    ]

"""The built-in ``xml``, ``markdown`` and ``plain`` formatters.

Untrusted content is data: the xml formatter escapes in every body exactly the sequences that
would open or close a wrapper tag (nothing else, so text reaches the model as written), the
markdown formatter fences untrusted bodies; file, memory and tool text cannot close or forge
structure.
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
    """``<tag path="…" title="…">`` around the body; the tag is the block's own, else
    ``context`` for a file, else ``block``. The body is verbatim but for the ``<`` of any
    opening or closing wrapper tag (``WRAPPER_TAGS`` and this block's tag), trusted or not.

    Every tag carries its block's ``path``, not only ``<context>`` (the working-set protocol
    shows it only there): the model names files by path when it adds, removes or
    re-prioritizes them, so a ``<developer>`` or ``<system>`` file needs its path shown too."""
    path = block.provenance.path
    tag = block.tag or ("context" if path else "block")
    if not valid_tag_name(tag):
        raise ValueError(f"block {block.id!r}: invalid xml tag name {tag!r}")
    attrs = "".join(
        f' {name}="{escape_xml_attr(value)}"'
        for name, value in (("path", path), ("title", block.title))
        if value
    )
    return f"<{tag}{attrs}>\n{escape_xml_text(block.body, (tag,))}\n</{tag}>"


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

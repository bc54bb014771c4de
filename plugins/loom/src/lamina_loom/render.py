"""Text the loom-aware extensions add: a metadata line per node, the loom context block and
the operational-memory block. Exact formats are documented in the README."""

from __future__ import annotations

from collections.abc import Sequence

from lamina import ImagePart, Part, TextPart
from lamina_loom.model import Node, Tree
from lamina_loom.settings import OperationalMemory, Settings

ADDENDUM_HEAD = """## Loom

This conversation is one path through a Loom Tree: each node is a turn, and a node may have \
several children (alternative continuations). You see the path from the root to the current \
node; nodes excluded from context are left out."""
ADDENDUM_NODE_METADATA = """\
- Each node's text starts with a line `[loom node=<id> author=<human|model>[:<name>] \
[created=<time>] parent=<id|none> children=<ids|none>]`: the node's id, who wrote it, when, \
and its neighbours in the tree. It describes the node and is not part of its text: refer to \
nodes by these ids, and never write such a line yourself."""
ADDENDUM_LOOM_CONTEXT = """\
- The "Loom context" block at the end of the context names the tree, your position in it \
(depth, parent, siblings, children) and your permissions."""
ADDENDUM_MEMORY = """\
- The "Operational memory" block holds what is pinned, the stashes you recalled and the \
trace of your recent actions."""


def addendum(settings: Settings) -> str:
    """The loom-aware addendum to the system prompt: what the loom-aware extensions that are
    on add to the context and how to read it (``addendum_text`` replaces it); empty when off.
    It depends on settings only, so it never moves the cached prefix."""
    if not settings.addendum_on:
        return ""
    if settings.addendum_text is not None:
        return settings.addendum_text
    bullets = [
        text
        for on, text in (
            (settings.node_metadata, ADDENDUM_NODE_METADATA),
            (settings.loom_context, ADDENDUM_LOOM_CONTEXT),
            (settings.operational_memory, ADDENDUM_MEMORY),
        )
        if on
    ]
    return "\n\n".join([ADDENDUM_HEAD, "\n".join(bullets)]) if bullets else ADDENDUM_HEAD


def node_header(tree: Tree, node: Node) -> str:
    """``[loom node=n3 author=human:alice created=… parent=n2 children=n4,n5]``."""
    author = node.author_type + (f":{node.metadata.author}" if node.metadata.author else "")
    fields = [f"node={node.label}", f"author={author}"]
    if node.metadata.created_at is not None:
        fields.append(f"created={node.metadata.created_at.isoformat()}")
    edge = tree.edge_into(node.id)
    fields.append(f"parent={tree.node(edge.primary).label if edge else 'none'}")
    children = [tree.node(c).label for c in tree.children(node.id)]
    fields.append(f"children={','.join(children) or 'none'}")
    return "[loom " + " ".join(fields) + "]"


def node_parts(node: Node, text: str, header: str | None) -> list[Part]:
    """A node's parts: its image (if any), then its text behind the optional header."""
    parts: list[Part] = []
    if node.image is not None:
        img = node.image
        parts.append(ImagePart(media_type=img.media_type, data=img.data, url=img.url))
    body = text if header is None else (f"{header}\n{text}" if text else header)
    if body:
        parts.append(TextPart(text=body))
    return parts


def merge_parts(chunks: Sequence[list[Part]], separator: str) -> tuple[Part, ...]:
    """Concatenate nodes' parts into one message: adjacent texts joined by ``separator``."""
    out: list[Part] = []
    for chunk in chunks:
        for part in chunk:
            last = out[-1] if out else None
            if isinstance(part, TextPart) and isinstance(last, TextPart):
                out[-1] = TextPart(text=last.text + separator + part.text)
            else:
                out.append(part)
    return tuple(out)


def loom_context(tree: Tree, path: Sequence[str], permissions: Sequence[str]) -> str:
    """The loom context block: the tree, the current position and the caller's permissions."""
    current = tree.node(path[-1])
    edge = tree.edge_into(current.id)
    siblings = len(tree.children(edge.primary)) - 1 if edge else 0
    children = [tree.node(c).label for c in tree.children(current.id)]
    name = f"{tree.name} ({tree.id})" if tree.name else tree.id
    return "\n".join(
        [
            f"Tree: {name}",
            f"Position: node {current.label} at depth {len(path)} "
            f"(parent: {tree.node(edge.primary).label if edge else 'none'}; "
            f"siblings: {siblings}; children: {', '.join(children) or 'none'})",
            f"Permissions: {', '.join(permissions) or 'none'}",
        ]
    )


def operational_memory(memory: OperationalMemory) -> str:
    """The operational-memory block: pinned content, recalled stashes, the action trace."""
    lines: list[str] = []
    if memory.pinned:
        lines += ["Pinned:", *(f"- {p}" for p in memory.pinned)]
    if memory.stashes:
        lines += ["Recalled stashes:", *(f"- {s.name}: {s.content}" for s in memory.stashes)]
    if memory.trace:
        lines += ["Action trace:", *(f"{i}. {a}" for i, a in enumerate(memory.trace, 1))]
    return "\n".join(lines)

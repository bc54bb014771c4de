"""The active path through a tree and what of it reaches the context (the Loom design): root →
current, exclusion, multi-source edges (instruction → context → primary), version resolution."""

from __future__ import annotations

from collections.abc import Collection

from attrs import frozen

from lamina_loom.errors import LoomError
from lamina_loom.model import Node, Tree


@frozen(kw_only=True)
class Entry:
    """A node that reaches the context, and why: ``path`` for a node on the active path,
    ``context`` for a context source placed before the primary it supports."""

    node: Node
    via: str


@frozen(kw_only=True)
class Selection:
    """What the path contributes: the nodes in context order, the instruction sources (for the
    system context) and every node left out, with the reason."""

    path: tuple[str, ...]
    entries: tuple[Entry, ...]
    instructions: tuple[Node, ...]
    excluded: tuple[tuple[str, str], ...]


def active_path(tree: Tree, current: str) -> tuple[str, ...]:
    """Node ids from the root to ``current`` following primary sources."""
    if not current:
        raise LoomError("no current position given", tree=tree.id)
    tree.node(current)  # raises when the current position is not in the tree
    path = [current]
    edge = tree.edge_into(current)
    while edge is not None:
        path.append(edge.primary)
        edge = tree.edge_into(edge.primary)
    return tuple(reversed(path))


def exclusion_reason(tree: Tree, node: Node, include: Collection[str] = ()) -> str | None:
    """Why ``node`` stays out of context (``None`` when it goes in).

    ``excluded`` and ``pruned`` always win; a node reached through an ``annotation`` edge is
    left out unless its metadata says ``included`` or the caller lists it in ``include``.
    """
    if node.metadata.excluded:
        return "excluded"
    if node.metadata.pruned:
        return "pruned"
    edge = tree.edge_into(node.id)
    if (
        edge is not None
        and edge.kind == "annotation"
        and not (node.metadata.included or node.id in include)
    ):
        return "annotation"
    return None


def select(tree: Tree, current: str, include: Collection[str] = ()) -> Selection:
    """Walk the active path and apply exclusion and multi-source edges.

    For the edge into each path node, instruction sources go to the system context and
    context sources are placed just before the edge's primary source (the previous path
    node), so a reference such as an image precedes the content it supports.
    """
    unknown = sorted(n for n in include if n not in tree.node_ids) if include else ()
    if unknown:
        raise LoomError(f"include names nodes not in the tree: {', '.join(unknown)}", tree=tree.id)
    path = active_path(tree, current)
    excluded: dict[str, str] = {}
    context_before: dict[str, list[str]] = {}
    instructions: list[Node] = []

    def keep(node: Node) -> bool:
        reason = exclusion_reason(tree, node, include)
        if reason is not None:
            excluded.setdefault(node.id, reason)
        return reason is None

    for node_id in path:
        edge = tree.edge_into(node_id)
        if edge is None:
            continue
        for source in edge.with_role("instruction"):
            node = tree.node(source)
            if keep(node) and node not in instructions:
                instructions.append(node)
        context_before.setdefault(edge.primary, []).extend(edge.with_role("context"))

    entries: list[Entry] = []
    placed: set[str] = set()
    for node_id in path:
        for source in context_before.get(node_id, ()):
            node = tree.node(source)
            if source not in placed and keep(node):
                entries.append(Entry(node=node, via="context"))
                placed.add(source)
        node = tree.node(node_id)
        if node_id not in placed and keep(node):
            entries.append(Entry(node=node, via="path"))
            placed.add(node_id)
    return Selection(
        path=path,
        entries=tuple(entries),
        instructions=tuple(instructions),
        excluded=tuple(excluded.items()),
    )


def resolve_version(tree: Tree, node: Node) -> str:
    """The text buffer mode shows for ``node``: its ``active_version`` when set, else its
    newest version, else its content."""
    versions = node.metadata.versions
    index = node.metadata.active_version
    if index is not None:
        if not 0 <= index < len(versions):
            raise LoomError(
                f"node {node.id!r} has active_version {index} but {len(versions)} version(s)",
                tree=tree.id,
            )
        return versions[index].content
    return versions[-1].content if versions else node.content

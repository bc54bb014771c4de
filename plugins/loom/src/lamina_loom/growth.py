"""A dialogue plan carried over to a tree that grew by one node under its current position, as
an editor's tree does after every new turn: only what the node changes is made again (its
message, or the last message it joins; the previous node's metadata line, which names its
children; the loom context), so the call costs the node, not the path.

``grown_plan`` answers only when the tree is the plan's with that one node and edge added (the
other nodes and edges the same objects, the tree's own fields equal) and the node is kept by a
plain edge: one primary source, nothing else, not an annotation. Anything else is planned
afresh (``plan_dialogue``), which the result always equals."""

from __future__ import annotations

from operator import is_

from attrs import fields

from lamina_loom.dialogue import (
    ROLES,
    DialogueOptions,
    DialoguePlan,
    PlannedMessage,
    plan_extras,
    planned_message,
)
from lamina_loom.model import Node, Tree
from lamina_loom.paths import Entry, Selection, exclusion_reason

#: The tree's own fields, compared when it grew (its nodes and edges are compared apart).
_OWN = tuple(f.name for f in fields(Tree) if f.eq and f.name not in ("nodes", "edges"))


def grown_plan(
    plan: DialoguePlan, tree: Tree, current: str, options: DialogueOptions
) -> DialoguePlan | None:
    """``plan`` (made with ``options``) carried over to ``tree`` at ``current``, or ``None``
    when ``tree`` is not ``plan.tree`` grown by ``current`` alone (see the module)."""
    old, path, settings = plan.tree, plan.selection.path, options.settings
    if not _grew_by_one(old, tree) or tree.nodes[-1].id != current:
        return None
    node, edge = tree.nodes[-1], tree.edges[-1]
    if edge.target != current or len(edge.sources) != 1 or edge.primary != path[-1]:
        return None
    if exclusion_reason(tree, node, options.include) is not None:
        return None
    entries = plan.selection.entries
    selection = Selection(
        path=(*path, current),
        entries=(*entries, Entry(node=node, via="path")),
        instructions=plan.selection.instructions,
        excluded=plan.selection.excluded,
    )
    # The last group of same-role nodes before the new one, and its message if it had one.
    last: list[Node] = []
    for entry in reversed(entries):
        if last and ROLES[entry.node.author_type] != ROLES[last[0].author_type]:
            break
        last.append(entry.node)
    last.reverse()
    messages = list(plan.messages)
    role = ROLES[node.author_type]
    joins = bool(last) and ROLES[last[0].author_type] == role
    made: list[PlannedMessage | None] = [planned_message(tree, role, [node], settings)]
    if joins or (last and settings.node_metadata):
        # The last group's message is made again: the node joins it, or a metadata line in
        # it (the previous node's) now names the node as a child.
        if messages and messages[-1].nodes == tuple(n.id for n in last):
            messages.pop()
        if joins:
            made = [planned_message(tree, role, [*last, node], settings)]
        else:
            made.insert(0, planned_message(tree, ROLES[last[0].author_type], last, settings))
    messages.extend(m for m in made if m is not None)
    return DialoguePlan(
        tree=tree,
        selection=selection,
        system=plan.system,
        messages=tuple(messages),
        extras=plan_extras(tree, selection.path, options),
    )


def _grew_by_one(old: Tree, tree: Tree) -> bool:
    """Whether ``tree`` is ``old`` with one node and one edge added at the end."""
    return (
        len(tree.nodes) == len(old.nodes) + 1
        and len(tree.edges) == len(old.edges) + 1
        and all(getattr(tree, name) == getattr(old, name) for name in _OWN)
        and all(map(is_, tree.nodes, old.nodes))
        and all(map(is_, tree.edges, old.edges))
    )

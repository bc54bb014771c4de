"""How a tree maps to the embedded store's rows and back: the rows of a whole tree, the rows
that differ between two versions of it, and the plain data its rows read back as."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from lamina import unstructure
from lamina_loom.errors import LoomError
from lamina_loom.model import Edge, Node, Tree

if TYPE_CHECKING:
    import sqlite3

#: The tables of a tree's rows, each with the column naming its tree.
TREE_TABLES: tuple[tuple[str, str], ...] = (
    ("loom_trees", "id"),
    ("loom_nodes", "tree_id"),
    ("loom_node_versions", "tree_id"),
    ("loom_edges", "tree_id"),
    ("loom_edge_sources", "tree_id"),
)

_INSERT_NODE = "INSERT INTO loom_nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_VERSION = "INSERT INTO loom_node_versions VALUES (?, ?, ?, ?, ?)"
_INSERT_EDGE = "INSERT INTO loom_edges VALUES (?, ?, ?, ?, ?)"
_INSERT_SOURCE = "INSERT INTO loom_edge_sources VALUES (?, ?, ?, ?, ?)"
Row = tuple[Any, ...]
_T = TypeVar("_T", Node, Edge)


def _tree_row(tree: Tree) -> Row:
    preferences = json.dumps(unstructure(tree.preferences), sort_keys=True)
    return (
        tree.id,
        tree.name,
        tree.system_context,
        int(tree.buffer_mode_system_context),
        preferences,
    )


def _node_rows(tree_id: str, seq: int, node: Node) -> tuple[Row, list[Row]]:
    """A node's row and its versions' rows."""
    data = unstructure(node)
    meta = data["metadata"]
    row = (
        tree_id,
        seq,
        data["id"],
        data["author_type"],
        data["content"],
        None if data["image"] is None else json.dumps(data["image"]),
        data["local_id"],
        int(meta["excluded"]),
        int(meta["pruned"]),
        int(meta["included"]),
        meta["active_version"],
        meta["author"],
        meta["created_at"],
        json.dumps(meta["extra"], sort_keys=True, ensure_ascii=False),
    )
    versions = [
        (tree_id, data["id"], vseq, v["content"], v["created_at"])
        for vseq, v in enumerate(meta["versions"])
    ]
    return row, versions


def _edge_rows(tree_id: str, seq: int, edge: Edge) -> tuple[Row, list[Row]]:
    """An edge's row and its sources' rows."""
    row = (tree_id, seq, edge.id, edge.target, edge.kind)
    sources = [(tree_id, edge.id, n, s.node, s.role) for n, s in enumerate(edge.sources)]
    return row, sources


def _insert(db: sqlite3.Connection, rows: list[tuple[Row, list[Row]]], one: str, many: str) -> None:
    db.executemany(one, [row for row, _ in rows])
    db.executemany(many, [inner for _, inners in rows for inner in inners])


def write_whole(db: sqlite3.Connection, tree: Tree) -> None:
    """Replace every row of ``tree``."""
    for table, key in reversed(TREE_TABLES):
        db.execute(f"DELETE FROM {table} WHERE {key} = ?", (tree.id,))
    db.execute("INSERT INTO loom_trees VALUES (?, ?, ?, ?, ?)", _tree_row(tree))
    nodes = [_node_rows(tree.id, seq, n) for seq, n in enumerate(tree.nodes)]
    _insert(db, nodes, _INSERT_NODE, _INSERT_VERSION)
    edges = [_edge_rows(tree.id, seq, e) for seq, e in enumerate(tree.edges)]
    _insert(db, edges, _INSERT_EDGE, _INSERT_SOURCE)


def write_changes(db: sqlite3.Connection, old: Tree, new: Tree) -> None:
    """Turn the rows of ``old`` (what the file holds) into those of ``new``: a node or edge
    that changed, or moved, is deleted and written again; one that is gone is deleted."""
    if _tree_row(old) != (row := _tree_row(new)):
        db.execute(
            "UPDATE loom_trees SET name = ?, system_context = ?, buffer_mode_system_context = ?, "
            "preferences = ? WHERE id = ?",
            (*row[1:], new.id),
        )
    nodes = _changed(db, "loom_nodes", new.id, old.nodes, new.nodes)
    _insert(db, [_node_rows(new.id, seq, n) for seq, n in nodes], _INSERT_NODE, _INSERT_VERSION)
    edges = _changed(db, "loom_edges", new.id, old.edges, new.edges)
    _insert(db, [_edge_rows(new.id, seq, e) for seq, e in edges], _INSERT_EDGE, _INSERT_SOURCE)


def _changed(
    db: sqlite3.Connection, table: str, tree_id: str, before: Sequence[_T], after: Sequence[_T]
) -> list[tuple[int, _T]]:
    """The items of ``after`` to write (new, changed or moved), with their positions; the rows
    of the changed and moved ones and of those gone are deleted here (with their versions or
    sources: the foreign keys cascade)."""
    was = {item.id: (seq, item) for seq, item in enumerate(before)}
    now = {item.id for item in after}
    changed = [(seq, item) for seq, item in enumerate(after) if was.get(item.id) != (seq, item)]
    stale = [i for i in was if i not in now] + [i.id for _, i in changed if i.id in was]
    db.executemany(
        f"DELETE FROM {table} WHERE tree_id = ? AND id = ?", [(tree_id, i) for i in stale]
    )
    return changed


def read_rows(db: sqlite3.Connection, tree_id: str, file: str) -> dict[str, Any]:
    """A tree's rows as the plain data ``build_tree`` checks (``LoomError`` when the store
    has no such tree)."""
    row = db.execute(
        "SELECT id, name, system_context, buffer_mode_system_context, preferences "
        "FROM loom_trees WHERE id = ?",
        (tree_id,),
    ).fetchone()
    if row is None:
        known = [r[0] for r in db.execute("SELECT id FROM loom_trees ORDER BY id")]
        raise LoomError(
            f"no tree {tree_id!r} in the store; known: {', '.join(known) or 'none'}",
            file=file,
        )
    versions: dict[str, list[dict[str, Any]]] = {}
    for node_id, content, created in db.execute(
        "SELECT node_id, content, created_at FROM loom_node_versions "
        "WHERE tree_id = ? ORDER BY node_id, seq",
        (tree_id,),
    ):
        versions.setdefault(node_id, []).append({"content": content, "created_at": created})
    nodes = [
        {
            "id": r[0],
            "author_type": r[1],
            "content": r[2],
            "image": None if r[3] is None else json.loads(r[3]),
            "local_id": r[4],
            "metadata": {
                "excluded": bool(r[5]),
                "pruned": bool(r[6]),
                "included": bool(r[7]),
                "versions": versions.get(r[0], []),
                "active_version": r[8],
                "author": r[9],
                "created_at": r[10],
                "extra": json.loads(r[11]),
            },
        }
        for r in db.execute(
            "SELECT id, author_type, content, image, local_id, excluded, pruned, "
            "included, active_version, author, created_at, extra FROM loom_nodes "
            "WHERE tree_id = ? ORDER BY seq",
            (tree_id,),
        )
    ]
    sources: dict[str, list[dict[str, Any]]] = {}
    for edge_id, node_id, role in db.execute(
        "SELECT edge_id, node_id, role FROM loom_edge_sources WHERE tree_id = ? "
        "ORDER BY edge_id, seq",
        (tree_id,),
    ):
        sources.setdefault(edge_id, []).append({"node": node_id, "role": role})
    edges = [
        {"id": r[0], "target": r[1], "kind": r[2], "sources": sources.get(r[0], [])}
        for r in db.execute(
            "SELECT id, target, kind FROM loom_edges WHERE tree_id = ? ORDER BY seq",
            (tree_id,),
        )
    ]
    data = {
        "id": row[0],
        "name": row[1],
        "system_context": row[2],
        "buffer_mode_system_context": bool(row[3]),
        "preferences": json.loads(row[4]),
        "nodes": nodes,
        "edges": edges,
    }
    return data

"""Where trees live: an embedded SQLite store (schema below), an in-memory store, and the
JSON import/export format (``{"format": "lamina-loom/1", "tree": {...}}``) a host uses to hand
Lamina a tree from its own store."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lamina import SerdeError, structure, unstructure
from lamina_loom.errors import LoomError
from lamina_loom.model import Tree

if TYPE_CHECKING:
    import sqlite3

JSON_FORMAT = "lamina-loom/1"
SCHEMA_VERSION = 1

#: The SQLite schema (also in the README). Booleans are 0/1, times ISO 8601 text, ``extra``
#: and ``preferences`` JSON objects. Ordering columns (``seq``) keep versions and sources in
#: the order they were written.
SCHEMA = """
CREATE TABLE IF NOT EXISTS loom_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS loom_trees (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    system_context TEXT NOT NULL DEFAULT '',
    buffer_mode_system_context INTEGER NOT NULL DEFAULT 0,
    preferences TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS loom_nodes (
    tree_id TEXT NOT NULL REFERENCES loom_trees(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    author_type TEXT NOT NULL CHECK (author_type IN ('human', 'model')),
    content TEXT NOT NULL DEFAULT '',
    image TEXT,
    local_id TEXT,
    excluded INTEGER NOT NULL DEFAULT 0,
    pruned INTEGER NOT NULL DEFAULT 0,
    included INTEGER NOT NULL DEFAULT 0,
    active_version INTEGER,
    author TEXT,
    created_at TEXT,
    extra TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (tree_id, id)
);
CREATE TABLE IF NOT EXISTS loom_node_versions (
    tree_id TEXT NOT NULL,
    node_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT,
    PRIMARY KEY (tree_id, node_id, seq),
    FOREIGN KEY (tree_id, node_id) REFERENCES loom_nodes(tree_id, id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS loom_edges (
    tree_id TEXT NOT NULL REFERENCES loom_trees(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    target TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('continuation', 'annotation')),
    PRIMARY KEY (tree_id, id)
);
CREATE TABLE IF NOT EXISTS loom_edge_sources (
    tree_id TEXT NOT NULL,
    edge_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    node_id TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('primary', 'context', 'instruction')),
    PRIMARY KEY (tree_id, edge_id, seq),
    FOREIGN KEY (tree_id, edge_id) REFERENCES loom_edges(tree_id, id) ON DELETE CASCADE
);
"""


@runtime_checkable
class TreeStore(Protocol):
    """Anything that can hand over a tree by id (a host may implement its own)."""

    def load(self, tree_id: str) -> Tree: ...


# -- JSON ----------------------------------------------------------------------------------


def tree_to_data(tree: Tree) -> dict[str, Any]:
    """The JSON export document of ``tree``."""
    data = unstructure(tree)
    return {"format": JSON_FORMAT, "tree": data}


def tree_to_json(tree: Tree, *, indent: int | None = 2) -> str:
    """``tree`` as export JSON text (deterministic)."""
    return json.dumps(tree_to_data(tree), indent=indent, ensure_ascii=False)


def tree_from_data(data: Any, *, file: str | None = None) -> Tree:
    """Build a tree from an export document; every problem names its path (``$.tree.nodes[2]``)."""
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise LoomError(
            f"not a loom tree export: expected format {JSON_FORMAT!r}, got {found!r}", file=file
        )
    extra = sorted(set(data) - {"format", "tree"})
    if extra:
        raise LoomError(f"unknown keys {extra} in the export document", file=file)
    return build_tree(data.get("tree"), file=file)


def build_tree(data: Any, *, file: str | None = None, what: str = "loom tree") -> Tree:
    """Structure plain data into a checked ``Tree``: shape errors are a ``SerdeError`` with
    paths, tree errors (a cycle, an edge to nowhere) a ``LoomError``; both name ``file``."""
    try:
        return structure(data, Tree, file=file, what=what)
    except SerdeError as exc:
        cause = _loom_cause(exc.__cause__)
        if cause is not None:
            raise LoomError(str(cause), file=file) from cause
        raise


def _loom_cause(exc: BaseException | None) -> LoomError | None:
    """The ``LoomError`` a structuring failure wraps (cattrs groups errors), if any."""
    if isinstance(exc, LoomError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _loom_cause(inner)
        if found is not None:
            return found
    return None


def tree_from_json(text: str | bytes, *, file: str | None = None) -> Tree:
    """Parse export JSON text into a tree."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoomError(f"not JSON: {exc}", file=file) from exc
    return tree_from_data(data, file=file)


# -- in memory -----------------------------------------------------------------------------


class MemoryStore:
    """Trees held in a dict; ``from_json_file`` reads one export file."""

    def __init__(self, trees: list[Tree] | tuple[Tree, ...] = ()) -> None:
        self._trees = {t.id: t for t in trees}

    @classmethod
    def from_json_file(cls, path: str | Path) -> MemoryStore:
        p = Path(path)
        try:
            text = p.read_text("utf-8")
        except OSError as exc:
            raise LoomError(f"cannot read tree file: {exc.strerror}", file=str(p)) from exc
        return cls([tree_from_json(text, file=str(p))])

    def save(self, tree: Tree) -> None:
        self._trees[tree.id] = tree

    def load(self, tree_id: str) -> Tree:
        found = self._trees.get(tree_id)
        if found is None:
            raise LoomError(
                f"no tree {tree_id!r} in the store; known: {', '.join(sorted(self._trees)) or 'none'}"
            )
        return found

    def tree_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._trees))


# -- SQLite --------------------------------------------------------------------------------


class SQLiteStore:
    """The embedded store: one SQLite file (created on first use) holding many trees.

    ``save`` replaces a tree whole in one transaction; ``load`` rebuilds and re-checks it, so a
    file edited by hand into a bad shape gives a ``LoomError`` naming the file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        import sqlite3

        with self._lock:
            try:
                conn = sqlite3.connect(self.path)
            except sqlite3.Error as exc:
                raise LoomError(f"cannot open loom store: {exc}", file=str(self.path)) from exc
            try:
                conn.execute("PRAGMA foreign_keys = ON")
                conn.executescript(SCHEMA)
                conn.execute(
                    "INSERT OR IGNORE INTO loom_meta(key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                with conn:
                    yield conn
            except sqlite3.Error as exc:
                raise LoomError(f"loom store error: {exc}", file=str(self.path)) from exc
            finally:
                conn.close()

    def save(self, tree: Tree) -> None:
        data = unstructure(tree)
        with self._connect() as db:
            db.execute("DELETE FROM loom_edge_sources WHERE tree_id = ?", (tree.id,))
            db.execute("DELETE FROM loom_node_versions WHERE tree_id = ?", (tree.id,))
            db.execute("DELETE FROM loom_edges WHERE tree_id = ?", (tree.id,))
            db.execute("DELETE FROM loom_nodes WHERE tree_id = ?", (tree.id,))
            db.execute("DELETE FROM loom_trees WHERE id = ?", (tree.id,))
            db.execute(
                "INSERT INTO loom_trees VALUES (?, ?, ?, ?, ?)",
                (
                    tree.id,
                    tree.name,
                    tree.system_context,
                    int(tree.buffer_mode_system_context),
                    json.dumps(data["preferences"], sort_keys=True),
                ),
            )
            for seq, node in enumerate(data["nodes"]):
                meta = node["metadata"]
                db.execute(
                    "INSERT INTO loom_nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        tree.id,
                        seq,
                        node["id"],
                        node["author_type"],
                        node["content"],
                        None if node["image"] is None else json.dumps(node["image"]),
                        node["local_id"],
                        int(meta["excluded"]),
                        int(meta["pruned"]),
                        int(meta["included"]),
                        meta["active_version"],
                        meta["author"],
                        meta["created_at"],
                        json.dumps(meta["extra"], sort_keys=True, ensure_ascii=False),
                    ),
                )
                for vseq, version in enumerate(meta["versions"]):
                    db.execute(
                        "INSERT INTO loom_node_versions VALUES (?, ?, ?, ?, ?)",
                        (tree.id, node["id"], vseq, version["content"], version["created_at"]),
                    )
            for seq, edge in enumerate(data["edges"]):
                db.execute(
                    "INSERT INTO loom_edges VALUES (?, ?, ?, ?, ?)",
                    (tree.id, seq, edge["id"], edge["target"], edge["kind"]),
                )
                for sseq, source in enumerate(edge["sources"]):
                    db.execute(
                        "INSERT INTO loom_edge_sources VALUES (?, ?, ?, ?, ?)",
                        (tree.id, edge["id"], sseq, source["node"], source["role"]),
                    )

    def load(self, tree_id: str) -> Tree:
        with self._connect() as db:
            row = db.execute(
                "SELECT id, name, system_context, buffer_mode_system_context, preferences "
                "FROM loom_trees WHERE id = ?",
                (tree_id,),
            ).fetchone()
            if row is None:
                known = [r[0] for r in db.execute("SELECT id FROM loom_trees ORDER BY id")]
                raise LoomError(
                    f"no tree {tree_id!r} in the store; known: {', '.join(known) or 'none'}",
                    file=str(self.path),
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
        return build_tree(data, file=str(self.path), what=f"loom tree {tree_id!r}")

    def tree_ids(self) -> tuple[str, ...]:
        with self._connect() as db:
            return tuple(r[0] for r in db.execute("SELECT id FROM loom_trees ORDER BY id"))

    def delete(self, tree_id: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM loom_trees WHERE id = ?", (tree_id,))

    def export_json(self, tree_id: str) -> str:
        """One tree as export JSON text."""
        return tree_to_json(self.load(tree_id))

    def import_json(self, text: str | bytes, *, file: str | None = None) -> Tree:
        """Check and save the tree in export JSON ``text``; returns it."""
        tree = tree_from_json(text, file=file)
        self.save(tree)
        return tree


def open_store(path: str | Path) -> SQLiteStore | MemoryStore:
    """A store for ``path``: ``.json`` is one exported tree (read-only), anything else SQLite."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        return MemoryStore.from_json_file(p)
    return SQLiteStore(p)


__all__ = [
    "JSON_FORMAT",
    "SCHEMA",
    "MemoryStore",
    "SQLiteStore",
    "TreeStore",
    "build_tree",
    "open_store",
    "tree_from_data",
    "tree_from_json",
    "tree_to_data",
    "tree_to_json",
]

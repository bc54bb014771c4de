"""The embedded store: one SQLite file holding many trees, with a revision per tree that
every write counts up (a trigger), so a tree decoded once is reused until it changes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from lamina_loom.errors import LoomError
from lamina_loom.model import Tree
from lamina_loom.sqlite_rows import TREE_TABLES, read_rows, write_changes, write_whole
from lamina_loom.tree_json import build_tree, tree_from_json, tree_to_json

if TYPE_CHECKING:
    import sqlite3

SCHEMA_VERSION = 2

#: The SQLite schema (also in the README). Booleans are 0/1, times ISO 8601 text, ``extra``
#: and ``preferences`` JSON objects. Ordering columns (``seq``) keep versions and sources in
#: the order they were written. ``loom_revisions`` outlives its tree: a tree deleted and saved
#: again goes on counting, so a revision is never seen twice.
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
CREATE TABLE IF NOT EXISTS loom_revisions (
    tree_id TEXT PRIMARY KEY,
    revision INTEGER NOT NULL DEFAULT 0
);
"""


def _revise(row: str, column: str) -> str:
    return (
        f"INSERT INTO loom_revisions(tree_id) VALUES ({row}.{column}) "
        "ON CONFLICT(tree_id) DO UPDATE SET revision = revision + 1;"
    )


#: One trigger per table and kind of write: any change to a tree's rows (by this store,
#: another process, or by hand) counts up the tree's revision in the same transaction.
REVISION_TRIGGERS = "".join(
    f"CREATE TRIGGER IF NOT EXISTS {table}_{event.lower()}_revises AFTER {event} ON {table} "
    f"BEGIN {' '.join(_revise(row, column) for row in rows)} END;\n"
    for table, column in TREE_TABLES
    for event, rows in (("INSERT", ("NEW",)), ("UPDATE", ("OLD", "NEW")), ("DELETE", ("OLD",)))
)

#: Trees kept decoded per store, the least recently loaded forgotten first.
KEPT_TREES = 8


class SQLiteStore:
    """The embedded store: one SQLite file (created on first use) holding many trees.

    ``save`` writes a tree in one transaction; ``load`` rebuilds and re-checks it, so a file
    edited by hand into a bad shape gives a ``LoomError`` naming the file. The last
    ``KEPT_TREES`` trees loaded or saved are kept decoded, with their revision: a load reads
    the tree's revision and rebuilds the tree only when a write has changed it, and a save of
    a kept tree writes only the rows that differ.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ready = False  # the schema is made (and a version 1 file brought up) once
        self._kept: OrderedDict[str, tuple[int, Tree]] = OrderedDict()
        #: How many times a tree was built from its rows (what the kept trees save).
        self.decoded = 0

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
                if not self._ready:
                    _prepare(conn, str(self.path))
                    self._ready = True
                with conn:
                    yield conn
            except sqlite3.Error as exc:
                self._ready = False  # (the file may have been replaced: made again next time)
                raise LoomError(f"loom store error: {exc}", file=str(self.path)) from exc
            finally:
                conn.close()

    def save(self, tree: Tree) -> None:
        """Write ``tree`` in one transaction: only the rows that differ from the tree kept
        decoded when nothing else has written it since, else the whole tree. The tree is then
        kept as loaded, at the revision the write made."""
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # no other writer between the revision and the rows
            kept = self._kept.get(tree.id)
            if kept is not None and kept[0] == _revision(db, tree.id):
                write_changes(db, kept[1], tree)
            else:
                write_whole(db, tree)
            revision = _revision(db, tree.id)
        if revision is not None:
            self._keep(tree.id, revision, tree)

    def load(self, tree_id: str) -> Tree:
        """The tree ``tree_id``: the one kept decoded while its revision is unchanged, else
        read, rebuilt and checked (and kept)."""
        where = str(self.path)
        with self._connect() as db:
            db.execute("BEGIN")  # the revision and the rows of one snapshot
            revision = _revision(db, tree_id)
            kept = self._kept.get(tree_id)
            if kept is not None and kept[0] == revision:
                self._kept.move_to_end(tree_id)
                return kept[1]
            data = read_rows(db, tree_id, where)
        tree = build_tree(data, file=where, what=f"loom tree {tree_id!r}")
        self.decoded += 1
        if revision is not None:
            self._keep(tree_id, revision, tree)
        return tree

    def _keep(self, tree_id: str, revision: int, tree: Tree) -> None:
        """Keep ``tree`` as read or written at ``revision`` (a thread that read an older one
        may replace a newer: the next load then reads the tree again, nothing worse)."""
        with self._lock:
            self._kept[tree_id] = (revision, tree)
            self._kept.move_to_end(tree_id)
            if len(self._kept) > KEPT_TREES:
                self._kept.popitem(last=False)

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


def _prepare(conn: sqlite3.Connection, file: str) -> None:
    """Make the schema and its triggers; a version 1 file (no revisions) gets a revision for
    each tree it holds, a file of a newer version is refused. Idempotent, so two processes
    may do it at once."""
    found = None
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'loom_meta'").fetchone():
        found = conn.execute("SELECT value FROM loom_meta WHERE key = 'schema_version'").fetchone()
    if found is not None and not str(found[0]).isdigit():
        raise LoomError(f"not a loom store: schema_version is {found[0]!r}", file=file)
    if found is not None and int(found[0]) > SCHEMA_VERSION:
        raise LoomError(
            f"the loom store has schema version {found[0]}, newer than this lamina-loom "
            f"supports ({SCHEMA_VERSION})",
            file=file,
        )
    with conn:
        conn.executescript(SCHEMA + REVISION_TRIGGERS)
        conn.execute("INSERT OR IGNORE INTO loom_revisions(tree_id) SELECT id FROM loom_trees")
        conn.execute(
            "INSERT INTO loom_meta(key, value) VALUES ('schema_version', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value "
            "WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)",
            (str(SCHEMA_VERSION),),
        )


def _revision(db: sqlite3.Connection, tree_id: str) -> int | None:
    found = db.execute("SELECT revision FROM loom_revisions WHERE tree_id = ?", (tree_id,))
    row = found.fetchone()
    return None if row is None else int(row[0])


__all__ = ["KEPT_TREES", "REVISION_TRIGGERS", "SCHEMA", "SCHEMA_VERSION", "SQLiteStore"]

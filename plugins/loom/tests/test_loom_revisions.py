"""Loading a tree again costs what changed: the SQLite store keeps trees decoded with their
revision, which every write counts up (whoever makes it); a tree file is decoded again only
when its bytes change; hook mode keeps the stores it opened."""

from __future__ import annotations

import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import pytest
from attrs import evolve
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from lamina_loom import (
    Edge,
    EdgeSource,
    Loom,
    LoomError,
    SQLiteStore,
    Tree,
    TreeFile,
    tree_to_json,
)
from lamina_loom import plugin as loom_plugin
from lamina_loom import store as store_module
from lamina_loom.model import Node, NodeMetadata, NodeVersion
from lamina_loom.sqlite_store import REVISION_TRIGGERS, SCHEMA_VERSION

from lamina.testing import make_assembler


def revision(path: Path, tree_id: str) -> int:
    with sqlite3.connect(path) as db:
        found = db.execute(
            "SELECT revision FROM loom_revisions WHERE tree_id = ?", (tree_id,)
        ).fetchone()
    return int(found[0])


def by_hand(path: Path, sql: str, *args: object) -> None:
    """A write made outside the store, as a person with the ``sqlite3`` shell makes it."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute(sql, args)


def test_an_unchanged_tree_is_decoded_once(tmp_path, story):
    path = tmp_path / "loom.db"
    SQLiteStore(path).save(story())
    store = SQLiteStore(path)
    first = store.load("story")
    assert store.load("story") is first
    assert store.decoded == 1
    assert first == story()


def test_a_saved_tree_is_kept_and_the_next_save_writes_what_changed(tmp_path, chain):
    path = tmp_path / "loom.db"
    store = SQLiteStore(path)
    tree = chain(count=200)
    store.save(tree)
    assert store.load("chain") is tree and store.decoded == 0
    # One node added: its row, its edge's and the edge's source's (each counts the revision).
    grown = evolve(
        tree,
        nodes=(*tree.nodes, Node(id="n999", author_type="human", content="next")),
        edges=(*tree.edges, Edge(id="e999", target="n999", sources=(EdgeSource(node="n200"),))),
    )
    before = revision(path, "chain")
    store.save(grown)
    assert revision(path, "chain") - before == 3
    # A node changed, one moved, one gone, the tree renamed: the file holds exactly the tree.
    nodes = list(grown.nodes)
    nodes[5] = evolve(nodes[5], content="changed")
    nodes[0], nodes[1] = nodes[1], nodes[0]
    edited = evolve(grown, name="renamed", nodes=tuple(nodes[:-1]), edges=grown.edges[:-1])
    store.save(edited)
    assert SQLiteStore(path).load("chain") == edited
    assert store.decoded == 0


# Each writes something the next load must show: (what, write, check on the loaded tree).
WRITES = [
    (
        "the store's own save",
        lambda path, tree: SQLiteStore(path).save(evolve(tree, name="renamed")),
        lambda tree: tree.name == "renamed",
    ),
    (
        "a node's text by hand",
        lambda path, tree: by_hand(path, "UPDATE loom_nodes SET content = 'x' WHERE id = 'a'"),
        lambda tree: tree.node("a").content == "x",
    ),
    (
        "a version by hand",
        lambda path, tree: by_hand(
            path, "UPDATE loom_node_versions SET content = 'v' WHERE node_id = 'b' AND seq = 0"
        ),
        lambda tree: tree.node("b").metadata.versions[0].content == "v",
    ),
    (
        "a node inserted by hand",
        lambda path, tree: by_hand(
            path,
            "INSERT INTO loom_nodes(tree_id, seq, id, author_type) VALUES ('story', 99, 'z', 'human')",
        ),
        lambda tree: any(n.id == "z" for n in tree.nodes),
    ),
    (
        "an edge's source removed by hand",
        lambda path, tree: by_hand(
            path, "DELETE FROM loom_edge_sources WHERE role = 'instruction'"
        ),
        lambda tree: not [e for e in tree.edges if e.with_role("instruction")],
    ),
    (
        "the tree's row by hand",
        lambda path, tree: by_hand(path, "UPDATE loom_trees SET system_context = 'new'"),
        lambda tree: tree.system_context == "new",
    ),
]


@pytest.mark.parametrize(("what", "write", "shows"), WRITES, ids=[w[0] for w in WRITES])
def test_every_write_is_seen_by_the_next_load(tmp_path, story, what, write, shows):
    path = tmp_path / "loom.db"
    store = SQLiteStore(path)
    store.save(story())
    before = store.load("story")
    assert not shows(before)
    decoded = store.decoded
    write(path, before)
    after = store.load("story")
    assert shows(after), what
    assert store.decoded == decoded + 1
    assert store.load("story") is after


def test_a_bad_hand_edit_is_an_error_at_the_next_load(tmp_path, story):
    path = tmp_path / "loom.db"
    store = SQLiteStore(path)
    store.save(story())
    store.load("story")
    by_hand(path, "UPDATE loom_edges SET target = 'zz' WHERE id = 'e-a'")
    with pytest.raises(LoomError, match="edge 'e-a' points to nowhere"):
        store.load("story")


def test_a_deleted_tree_is_never_served_from_memory(tmp_path, story):
    path = tmp_path / "loom.db"
    store = SQLiteStore(path)
    store.save(story())
    store.load("story")
    kept = revision(path, "story")
    SQLiteStore(path).delete("story")  # another store: this one learns it from the revision
    with pytest.raises(LoomError, match="no tree 'story' in the store"):
        store.load("story")
    SQLiteStore(path).save(story())  # the same tree again: a later revision, read afresh
    assert revision(path, "story") > kept
    assert store.load("story") == story()
    assert store.decoded == 1


def test_a_version_1_file_is_brought_up(tmp_path, story):
    path = tmp_path / "loom.db"
    SQLiteStore(path).save(story())
    with sqlite3.connect(path) as db:  # as the first version of the schema left it
        for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            db.execute(f"DROP TRIGGER {name}")
        db.execute("DROP TABLE loom_revisions")
        db.execute("UPDATE loom_meta SET value = '1' WHERE key = 'schema_version'")
    store = SQLiteStore(path)
    assert store.load("story") == story()
    with sqlite3.connect(path) as db:
        version = db.execute("SELECT value FROM loom_meta WHERE key = 'schema_version'")
        assert version.fetchone() == (str(SCHEMA_VERSION),)
        triggers = db.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'")
        assert triggers.fetchone() == (REVISION_TRIGGERS.count("CREATE TRIGGER"),)
    by_hand(path, "UPDATE loom_nodes SET content = 'x' WHERE id = 'a'")
    assert store.load("story").node("a").content == "x"


def test_a_load_never_mixes_two_saves(tmp_path, chain):
    """A writer saving two versions over and over while another store loads: every load is
    one whole version (the revision and the rows are read in one snapshot)."""
    path = tmp_path / "loom.db"
    first = chain(count=40)
    other = tuple(evolve(n, content=n.content + "!") for n in first.nodes)
    versions = [first, evolve(first, name="other", nodes=other)]
    SQLiteStore(path).save(versions[0])
    stop = threading.Event()

    last = [versions[0]]

    def write() -> None:
        writer, n = SQLiteStore(path), 0
        while not stop.is_set():
            n += 1
            writer.save(versions[n % 2])
            last[0] = versions[n % 2]
            time.sleep(0.0002)  # (a writer in a loop with no pause would keep readers waiting)

    thread = threading.Thread(target=write)
    thread.start()
    try:
        reader = SQLiteStore(path)
        seen = [reader.load("chain") for _ in range(300)]
    finally:
        stop.set()
        thread.join()
    assert all(tree in versions for tree in seen)
    assert reader.load("chain") == last[0]


@st.composite
def trees(draw: st.DrawFn, tree_id: str) -> Tree:
    """A chain of one to four nodes, in any order, some with a version: saved over one
    another, nodes and edges change, move, appear and go."""
    texts = draw(st.lists(st.text("ab", max_size=2), min_size=1, max_size=4))
    versioned = draw(st.lists(st.booleans(), min_size=len(texts), max_size=len(texts)))
    nodes = [
        Node(
            id=f"n{i}",
            author_type="human",
            content=text,
            metadata=NodeMetadata(versions=(NodeVersion(content=text + "v"),) if v else ()),
        )
        for i, (text, v) in enumerate(zip(texts, versioned, strict=True))
    ]
    edges = [
        Edge(id=f"e{i}", target=f"n{i}", sources=(EdgeSource(node=f"n{i - 1}"),))
        for i in range(1, len(nodes))
    ]
    return Tree(
        id=tree_id,
        name=draw(st.sampled_from(["", "x"])),
        nodes=tuple(draw(st.permutations(nodes))),
        edges=tuple(draw(st.permutations(edges))),
    )


class StoreMachine(RuleBasedStateMachine):
    """Two stores on one file and writes by hand, against what the file holds: a load from
    either store always returns the tree as last written."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "loom.db"
        self.stores = [SQLiteStore(self.path), SQLiteStore(self.path)]
        self.truth: dict[str, Tree] = {}

    def teardown(self) -> None:
        self.dir.cleanup()

    @rule(which=st.integers(0, 1), tree_id=st.sampled_from(["t", "u"]), data=st.data())
    def save(self, which: int, tree_id: str, data: st.DataObject) -> None:
        tree = data.draw(trees(tree_id))
        self.stores[which].save(tree)
        self.truth[tree_id] = tree

    @precondition(lambda self: bool(self.truth))
    @rule(data=st.data(), text=st.text("ab", max_size=3))
    def edit_by_hand(self, data: st.DataObject, text: str) -> None:
        tree_id = data.draw(st.sampled_from(sorted(self.truth)))
        sql = "UPDATE loom_nodes SET content = ? WHERE tree_id = ? AND id = 'n0'"
        by_hand(self.path, sql, text, tree_id)
        tree = self.truth[tree_id]
        nodes = tuple(evolve(n, content=text) if n.id == "n0" else n for n in tree.nodes)
        self.truth[tree_id] = evolve(tree, nodes=nodes)

    @precondition(lambda self: bool(self.truth))
    @rule(which=st.integers(0, 1), data=st.data())
    def delete(self, which: int, data: st.DataObject) -> None:
        tree_id = data.draw(st.sampled_from(sorted(self.truth)))
        self.stores[which].delete(tree_id)
        del self.truth[tree_id]

    @rule(which=st.integers(0, 1), tree_id=st.sampled_from(["t", "u"]))
    def load(self, which: int, tree_id: str) -> None:
        if tree_id in self.truth:
            assert self.stores[which].load(tree_id) == self.truth[tree_id]
        else:
            with pytest.raises(LoomError, match="no tree"):
                self.stores[which].load(tree_id)

    @invariant()
    def both_stores_agree(self) -> None:
        for tree_id, tree in self.truth.items():
            assert [s.load(tree_id) for s in self.stores] == [tree, tree]


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=60, stateful_step_count=15, deadline=None)


def test_a_tree_file_is_decoded_again_only_when_its_bytes_change(tmp_path, story):
    path = tmp_path / "story.json"
    path.write_text(tree_to_json(story()), "utf-8")
    tree_file = TreeFile(path)
    first = tree_file.load("story")
    assert tree_file.load("story") is first and tree_file.decoded == 1
    path.write_text(tree_to_json(story(system_context="Now for grown-ups.")), "utf-8")
    assert tree_file.load("story").system_context == "Now for grown-ups."
    path.unlink()
    with pytest.raises(LoomError, match="cannot read tree file"):
        tree_file.load("story")


def test_hook_mode_keeps_the_store_it_opened(tmp_path, story, monkeypatch):
    path = tmp_path / "story.json"
    path.write_text(tree_to_json(story()), "utf-8")
    decoded = []
    real = store_module.tree_from_json
    monkeypatch.setattr(
        store_module, "tree_from_json", lambda *a, **k: decoded.append(1) or real(*a, **k)
    )
    cfg = {"model": "claude-sonnet-4", "plugins": {"loom": {"store": str(path)}}}
    a = make_assembler(cfg, plugins=[("loom", loom_plugin)])
    request = a.request("x", metadata={"loom": {"tree": "story", "node": "b"}})
    texts = [m.text for m in a.assemble(request).history]
    assert [m.text for m in a.assemble(request).history] == texts
    assert len(decoded) == 1
    path.write_text(tree_to_json(story(system_context="Now for grown-ups.")), "utf-8")
    assert a.assemble(request).system_prompt.endswith("Now for grown-ups.")
    assert len(decoded) == 2


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The nodes ``plan_dialogue`` is asked to plan for, in order (it still plans them)."""
    import lamina_loom.plans as plans_module

    asked: list[str] = []
    real = plans_module.plan_dialogue
    monkeypatch.setattr(
        plans_module,
        "plan_dialogue",
        lambda tree, node, options: asked.append(node) or real(tree, node, options),
    )
    return asked


def test_the_same_position_is_planned_once_per_tree(tmp_path, story, loom_config, planned):
    """Another generation from the same node plans nothing again while the store hands back
    the same tree; a saved change, or other options, plan afresh."""
    store = SQLiteStore(tmp_path / "loom.db")
    store.save(story())
    with Loom(store, config=loom_config()) as loom:
        first = loom.dialogue("story", "k")
        again = loom.dialogue("story", "k")
        assert planned == ["k"]
        assert again.context.history == first.context.history
        assert again.context.report.blocks == first.context.report.blocks
        loom.dialogue("story", "k", agent_system="Another agent.")
        assert planned == ["k", "k"]
        store.save(story(system_context="Now for grown-ups."))
        changed = loom.dialogue("story", "k")
        assert planned == ["k", "k", "k"]
        assert "Now for grown-ups." in changed.context.system_prompt


def test_hook_mode_plans_a_request_once(tmp_path, story, planned):
    path = tmp_path / "story.json"
    path.write_text(tree_to_json(story()), "utf-8")
    cfg = {"model": "claude-sonnet-4", "plugins": {"loom": {"store": str(path)}}}
    a = make_assembler(cfg, plugins=[("loom", loom_plugin)])
    request = a.request("x", metadata={"loom": {"tree": "story", "node": "d"}})
    a.assemble(request)  # the wrapper (the tree's preferences) and the provider: one plan
    a.assemble(request)
    assert planned == ["d"]


def test_buffer_mode_counts_a_position_asked_again_from_memory(
    tmp_path, chain, loom_config, monkeypatch
):
    from lamina.tokenizers import TiktokenTokenizer

    counted: list[int] = []
    real = TiktokenTokenizer.count
    monkeypatch.setattr(
        TiktokenTokenizer, "count", lambda self, text: counted.append(len(text)) or real(self, text)
    )
    store = SQLiteStore(tmp_path / "loom.db")
    store.save(chain(count=40))
    with Loom(store, config=loom_config()) as loom:
        first = loom.buffer("chain", "n40", model="gpt-4o", max_tokens=60)
        assert first.truncated and len(counted) > 2  # a cut: several candidate documents
        counted.clear()
        assert loom.buffer("chain", "n40", model="gpt-4o", max_tokens=60) == first
        assert counted == []  # every one counted before


def test_a_grown_tree_reuses_the_blocks_of_its_earlier_messages(chain):
    from lamina_loom.dialogue import DialogueOptions
    from lamina_loom.plans import Plans
    from lamina_loom.settings import Settings

    plans, settings = Plans(), Settings()
    tree = chain(count=12)
    other = "model" if tree.nodes[-1].author_type == "human" else "human"  # a message of its own
    grown = evolve(
        tree,
        nodes=(*tree.nodes, Node(id="n13", author_type=other, content="next")),
        edges=(*tree.edges, Edge(id="e13", target="n13", sources=(EdgeSource(node="n12"),))),
    )
    before = plans.blocks(plans.plan(tree, "n12", DialogueOptions(settings=settings)))
    after = plans.blocks(plans.plan(grown, "n13", DialogueOptions(settings=settings)))
    kept = [b for b in before if b.layer == "session"]
    now = [b for b in after if b.layer == "session"]
    assert len(now) == len(kept) + 1 and len(kept) >= 10
    assert all(a is b for a, b in zip(kept, now, strict=False))  # the same objects


def test_a_store_of_a_newer_or_unknown_schema_is_refused(tmp_path, story):
    path = tmp_path / "loom.db"
    SQLiteStore(path).save(story())
    by_hand(path, "UPDATE loom_meta SET value = '9' WHERE key = 'schema_version'")
    with pytest.raises(LoomError, match=r"loom\.db: the loom store has schema version 9, newer"):
        SQLiteStore(path).load("story")
    by_hand(path, "UPDATE loom_meta SET value = 'x' WHERE key = 'schema_version'")
    with pytest.raises(LoomError, match=r"loom\.db: not a loom store: schema_version is 'x'"):
        SQLiteStore(path).load("story")

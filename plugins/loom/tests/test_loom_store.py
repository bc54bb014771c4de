"""The tree model's checks, the SQLite store and the JSON import/export."""

from __future__ import annotations

import json
import sqlite3

import pytest
from attrs import evolve
from lamina_loom import (
    SCHEMA,
    Loom,
    LoomError,
    MemoryStore,
    Node,
    SQLiteStore,
    Tree,
    open_store,
    tree_from_json,
    tree_to_json,
)
from lamina_loom.store import tree_from_data

from lamina import SerdeError


def h(i: str) -> Node:
    return Node(id=i, author_type="human", content=i)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (
            lambda e: dict(nodes=(h("a"), h("b")), edges=(e("1", "a", "b"), e("2", "b", "a"))),
            r"loom tree 't': cycle through parent edges: a -> b -> a",
        ),
        (
            lambda e: dict(nodes=(h("a"),), edges=(e("1", "x", "a"),)),
            r"edge '1' has a missing node: its primary source 'x'",
        ),
        (
            lambda e: dict(nodes=(h("a"), h("b")), edges=(e("1", "a", "b", context="img"),)),
            r"its context source 'img' is not a node",
        ),
        (
            lambda e: dict(nodes=(h("a"),), edges=(e("1", "a", "zz"),)),
            r"edge '1' points to nowhere: its target 'zz'",
        ),
        (lambda e: dict(nodes=(h("a"), h("a"))), "node id 'a' appears twice"),
        (
            lambda e: dict(
                nodes=(h("a"), h("b"), h("c")), edges=(e("1", "a", "c"), e("2", "b", "c"))
            ),
            "node 'c' has two incoming edges",
        ),
    ],
    ids=["cycle", "missing-source", "missing-context", "nowhere", "twice", "two-parents"],
)
def test_a_tree_of_the_wrong_shape_is_an_error(edge, shape, message):
    with pytest.raises(LoomError, match=message):
        Tree(id="t", **shape(edge))


def test_an_unknown_author_type_is_an_error():
    with pytest.raises(ValueError, match="author_type"):
        Node(id="x", author_type="robot")  # type: ignore[arg-type]


def test_current_position_not_in_the_tree(loom_config, story):
    loom = Loom(MemoryStore([story()]), config=loom_config(), entry_points=False)
    with pytest.raises(LoomError, match=r"loom tree 'story': node 'nope' is not in the tree"):
        loom.dialogue("story", "nope")
    with pytest.raises(LoomError, match=r"node 'nope' is not in the tree"):
        loom.buffer("story", "nope")
    with pytest.raises(LoomError, match=r"include names nodes not in the tree: ghost"):
        loom.dialogue("story", "k", include=["ghost"])
    with pytest.raises(LoomError, match=r"no tree 'other' in the store; known: story"):
        loom.dialogue("other", "k")


def test_json_round_trip_is_exact(story):
    tree = story()
    text = tree_to_json(tree)
    assert json.loads(text)["format"] == "lamina-loom/1"
    assert "_by_id" not in text
    again = tree_from_json(text)
    assert again == tree
    assert tree_to_json(again) == text


def test_json_errors_name_the_path_and_file(story):
    data = json.loads(tree_to_json(story()))
    data["tree"]["nodes"][0]["colour"] = "red"
    with pytest.raises(SerdeError, match=r"unknown keys \['colour'\] @ \$\.nodes\[0\]"):
        tree_from_data(data, file="t.json")
    with pytest.raises(LoomError, match="not a loom tree export"):
        tree_from_data({"tree": {}})
    with pytest.raises(LoomError, match="^x.json: not JSON"):
        tree_from_json("{", file="x.json")
    data = json.loads(tree_to_json(story()))
    data["tree"]["edges"][0]["target"] = "zz"
    with pytest.raises(
        LoomError, match=r"^t\.json: loom tree 'story': edge 'e-a' points to nowhere"
    ):
        tree_from_data(data, file="t.json")


def test_sqlite_round_trip(tmp_path, story):
    store = SQLiteStore(tmp_path / "loom.db")
    tree = story()
    store.save(tree)
    assert store.load("story") == tree
    store.save(evolve(tree, name="Renamed"))  # replaces the whole tree
    assert store.load("story").name == "Renamed"
    assert store.tree_ids() == ("story",)
    assert SQLiteStore(tmp_path / "loom.db").export_json("story") == tree_to_json(
        evolve(tree, name="Renamed")
    )
    store.delete("story")
    assert store.tree_ids() == ()


def test_sqlite_import_and_open_store(tmp_path, story):
    store = SQLiteStore(tmp_path / "x.sqlite")
    imported = store.import_json(tree_to_json(story()))
    assert imported == store.load("story")
    (tmp_path / "t.json").write_text(tree_to_json(story()), "utf-8")
    assert open_store(tmp_path / "t.json").load("story") == story()
    assert isinstance(open_store(tmp_path / "x.sqlite"), SQLiteStore)
    with pytest.raises(LoomError, match="cannot read tree file"):
        open_store(tmp_path / "missing.json")


def test_sqlite_schema_is_the_documented_one_and_bad_rows_are_caught(tmp_path, story):
    path = tmp_path / "loom.db"
    SQLiteStore(path).save(story())
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        db.execute("UPDATE loom_edges SET target = 'zz' WHERE id = 'e-a'")
    assert tables == {
        "loom_meta",
        "loom_trees",
        "loom_nodes",
        "loom_node_versions",
        "loom_edges",
        "loom_edge_sources",
        "loom_revisions",
    }
    assert all(f"CREATE TABLE IF NOT EXISTS {t}" in SCHEMA for t in tables)
    with pytest.raises(
        LoomError, match=r"loom\.db: loom tree 'story': edge 'e-a' points to nowhere"
    ):
        SQLiteStore(path).load("story")


def test_readme_documents_the_schema():
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text("utf-8")
    for line in SCHEMA.strip().splitlines():
        assert line in readme


def test_one_call_functions_take_a_path(tmp_path, loom_config, story):
    from lamina_loom import assemble_buffer, assemble_dialogue

    (tmp_path / "t.json").write_text(tree_to_json(story()), "utf-8")
    result = assemble_dialogue(tmp_path / "t.json", "story", "b", config=loom_config())
    assert [m.text for m in result.messages] == [
        "Once upon a time,",
        " there was a fox.",
        " Tell me more.",
    ]
    SQLiteStore(tmp_path / "t.db").save(story())
    doc = assemble_buffer(str(tmp_path / "t.db"), "story", "b", config=loom_config())
    assert doc.document == "Once upon a time, there was a fox. Tell me everything."

"""A tree that grew by one node under the current position is planned from the previous plan
(``lamina_loom.growth``), and the plan is always the one made afresh: whatever the node (its
author, content, flags, image), its edge (plain, with context or instruction sources, an
annotation) and the settings (metadata lines, loom context, operational memory)."""

from __future__ import annotations

from typing import Any

import lamina_loom.plans as plans_module
import pytest
from attrs import evolve
from hypothesis import given, settings
from hypothesis import strategies as st
from lamina_loom import (
    Edge,
    EdgeSource,
    LoomError,
    Node,
    NodeImage,
    NodeMetadata,
    OperationalMemory,
    Tree,
)
from lamina_loom.dialogue import DialogueOptions, plan_dialogue
from lamina_loom.paths import exclusion_reason
from lamina_loom.plans import Plans
from lamina_loom.settings import Settings

contents = st.sampled_from(["", "hi", "a longer turn.", "é😀 x"])


@st.composite
def nodes(draw: Any, i: int) -> Node:
    return Node(
        id=f"n{i}",
        author_type=draw(st.sampled_from(["human", "model"])),
        content=draw(contents),
        image=NodeImage(media_type="image/png", url="https://example.org/x.png")
        if draw(st.integers(0, 9)) == 0
        else None,
        metadata=NodeMetadata(
            excluded=draw(st.integers(0, 5)) == 0,
            pruned=draw(st.integers(0, 7)) == 0,
            included=draw(st.booleans()),
        ),
    )


@st.composite
def edges(draw: Any, i: int) -> Edge:
    """The edge into node ``i``: from node ``i - 1``, with now and then a context or an
    instruction source among the earlier nodes, or an annotation."""
    sources = [EdgeSource(node=f"n{i - 1}")]
    for role in ("context", "instruction"):
        if i > 1 and draw(st.integers(0, 3)) == 0:
            sources.append(EdgeSource(node=f"n{draw(st.integers(0, i - 2))}", role=role))
    kind = "annotation" if draw(st.integers(0, 6)) == 0 else "continuation"
    return Edge(id=f"e{i}", target=f"n{i}", sources=tuple(sources), kind=kind)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), length=st.integers(1, 8))
def test_a_grown_tree_is_planned_as_it_would_be_afresh(data: st.DataObject, length: int) -> None:
    chain = [data.draw(nodes(i)) for i in range(length)]
    tree = Tree(
        id="t",
        system_context=data.draw(st.sampled_from(["", "Be kind."])),
        nodes=tuple(chain),
        edges=tuple(data.draw(edges(i)) for i in range(1, length)),
    )
    options = DialogueOptions(
        settings=Settings(
            node_metadata=data.draw(st.booleans()),
            loom_context=data.draw(st.booleans()),
            operational_memory=data.draw(st.booleans()),
        ),
        permissions=data.draw(st.sampled_from([(), ("read",)])),
        memory=data.draw(st.sampled_from([None, OperationalMemory(pinned=("pin",))])),
        include=data.draw(st.sampled_from([(), ("n0",)])),
    )
    plans = Plans()
    try:
        plans.plan(tree, f"n{length - 1}", options)
    except LoomError:  # nothing to send on this path: nothing to grow from
        return
    grown = evolve(
        tree,
        nodes=(*tree.nodes, data.draw(nodes(length))),
        edges=(*tree.edges, data.draw(edges(length))),
    )
    afresh: list[object] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        afresh.append(args)
        return plan_dialogue(*args, **kwargs)

    current = f"n{length}"
    try:
        expected = plan_dialogue(grown, current, options)
    except LoomError as exc:
        with pytest.raises(LoomError, match="nothing to assemble"):
            plans.plan(grown, current, options)
        assert "nothing to assemble" in str(exc)
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plans_module, "plan_dialogue", counted)
        assert plans.plan(grown, current, options) == expected
    # Carried over exactly when it may be: one primary source, and the node kept (an
    # annotation is, when included).
    plain = len(grown.edges[-1].sources) == 1
    kept = exclusion_reason(grown, grown.nodes[-1], options.include) is None
    assert (afresh == []) == (plain and kept)


def test_the_previous_plans_messages_are_shared() -> None:
    """A grown plan keeps the earlier messages themselves, so their blocks are found again."""
    chain = [
        Node(id=f"n{i}", author_type=("human", "model")[i % 2], content=f"turn {i}")
        for i in range(50)
    ]
    links = [
        Edge(id=f"e{i}", target=f"n{i}", sources=(EdgeSource(node=f"n{i - 1}"),))
        for i in range(1, 50)
    ]
    tree = Tree(id="t", nodes=tuple(chain[:49]), edges=tuple(links[:48]))
    plans, options = Plans(), DialogueOptions(settings=Settings())
    before = plans.plan(tree, "n48", options)
    after = plans.plan(evolve(tree, nodes=tuple(chain), edges=tuple(links)), "n49", options)
    assert all(a is b for a, b in zip(after.messages, before.messages, strict=False))
    assert len(after.messages) == 50 and after.messages[-1].nodes == ("n49",)

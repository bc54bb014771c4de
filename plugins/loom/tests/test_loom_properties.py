"""Hypothesis properties for the Loom design's guarantees, in both modes and under every strategy:
the system context is never cut, at least one message stays, the recent nodes and the
working buffer stay, the result fits, and truncation always shows in the flags."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lamina_loom import (
    Edge,
    EdgeSource,
    Loom,
    LoomError,
    MemoryStore,
    Node,
    NodeMetadata,
    NodeVersion,
    Preferences,
    Tree,
)

from lamina import BudgetError

STRATEGIES = ("truncateMiddle", "rollingWindow", "stopAtLimit")
PROPS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
text = st.text(st.sampled_from("abc xyz.\né😀"), min_size=1, max_size=40)


@st.composite
def trees(draw):
    count = draw(st.integers(1, 10))
    nodes = []
    for i in range(count):
        versions = tuple(NodeVersion(content=t) for t in draw(st.lists(text, max_size=2)))
        nodes.append(
            Node(
                id=f"n{i}",
                author_type=draw(st.sampled_from(["human", "model"])),
                content=draw(text),
                metadata=NodeMetadata(
                    excluded=draw(st.booleans()) and draw(st.booleans()),
                    pruned=draw(st.booleans()) and draw(st.booleans()) and draw(st.booleans()),
                    versions=versions,
                ),
            )
        )
    prefs = Preferences(
        truncation_strategy=draw(st.sampled_from(STRATEGIES)),
        minimum_recent_nodes=draw(st.integers(0, 5)),
        token_buffer=0,
    )
    return Tree(
        id="p",
        system_context=draw(st.text(st.sampled_from("sys ."), max_size=30)),
        buffer_mode_system_context=draw(st.booleans()),
        preferences=prefs,
        nodes=tuple(nodes),
        edges=tuple(
            Edge(
                id=f"e{i}", target=f"n{i}", sources=(EdgeSource(node=f"n{i - 1}", role="primary"),)
            )
            for i in range(1, count)
        ),
    )


@pytest.fixture(scope="module")
def loom(loom_config):  # type: ignore[no-untyped-def]
    with Loom(MemoryStore(), config=loom_config(), entry_points=False) as loom:
        yield loom


def kept_nodes(tree: Tree) -> list[Node]:
    return [n for n in tree.nodes if not (n.metadata.excluded or n.metadata.pruned)]


@PROPS
@given(tree=trees(), cap=st.integers(1, 120), agent=st.sampled_from(["", "Agent."]))
def test_dialogue_guarantees(loom, tree, cap, agent):
    loom.store.save(tree)
    last = tree.nodes[-1].id
    included = kept_nodes(tree)
    system = "\n\n".join(s for s in (agent, tree.system_context) if s)
    try:
        result = loom.dialogue("p", last, agent_system=agent, max_tokens=cap)
    except LoomError as exc:
        assert not included and "nothing to assemble" in str(exc)
        return
    except BudgetError as exc:
        message = str(exc)
        counter = loom.assembler("truncateMiddle", 4, 0).model("claude-sonnet-4").counter
        if counter.count(system) > exc.available:
            assert "system context alone" in message
        else:
            assert (
                "stopAtLimit" in message
                or "must not be cut" in message
                or "protected group" in message
            ), message
        return
    ctx = result.context
    assert ctx.system_prompt == system  # never truncated
    loom_messages = [m for m in ctx.history if m.context_json]
    assert loom_messages  # at least one message
    assert ctx.token_budget.used.total <= ctx.token_budget.available
    shown = [n for m in loom_messages for n in m.context_json["loom"]["nodes"]]
    assert sorted(shown + list(result.removed_nodes)) == sorted(n.id for n in included)
    newest = [n.id for n in included][-max(1, tree.preferences.minimum_recent_nodes or 0) :]
    assert set(newest) <= set(shown)
    assert result.truncated == bool(result.removed_nodes)
    has_marker = any(m.context_json is None for m in ctx.history)
    if tree.preferences.truncation_strategy == "stopAtLimit":
        assert not result.truncated
    elif result.truncated:
        # Without a marker, what is left is less than a marker (its text and framing) and the
        # framing the kernel's estimate keeps for the before/after-history wrapper message,
        # which it reserves whether or not the formatter writes one.
        info = loom.assembler("truncateMiddle", 4, 0).model("claude-sonnet-4").info
        marker_tokens = 9 + info.message_overhead
        assert has_marker or ctx.token_budget.available - ctx.token_budget.used.total < (
            marker_tokens + 3 + info.message_overhead
        )


def resolved(node: Node) -> str:
    versions = node.metadata.versions
    return versions[-1].content if versions else node.content


@PROPS
@given(
    tree=trees(),
    cap=st.integers(1, 120),
    working=st.sampled_from(["", " and then"]),
    model=st.sampled_from(["claude-sonnet-4", "gpt-4o"]),
)
def test_buffer_guarantees(loom, tree, cap, working, model):
    loom.store.save(tree)
    last = tree.nodes[-1].id
    included = kept_nodes(tree)
    tokenizer = loom.assembler("truncateMiddle", 4, 0).model(model).tokenizer
    system = tree.system_context if tree.buffer_mode_system_context else ""
    prefix = system + "\n\n" if system else ""
    full = prefix + "".join(resolved(n) for n in included) + working
    protected = max(1, tree.preferences.minimum_recent_nodes or 0)
    recent = "".join(resolved(n) for n in included[-protected:]) + working
    try:
        result = loom.buffer("p", last, working_buffer=working, max_tokens=cap, model=model)
    except LoomError as exc:
        assert not included and not working and "nothing to assemble" in str(exc)
        return
    except BudgetError as exc:
        message = str(exc)
        if tokenizer.count(prefix) > cap:
            assert "system context alone" in message
        elif tokenizer.count(prefix + recent) > cap:
            assert "never cut" in message
        else:
            assert tree.preferences.truncation_strategy == "stopAtLimit"
            assert "would have to remove" in message and tokenizer.count(full) > cap
        return
    doc = result.document
    assert result.tokens == tokenizer.count(doc) <= cap
    assert doc.startswith(prefix) and result.system_included == bool(system)
    assert doc.endswith(recent)
    assert result.truncated == (doc != full)
    assert result.truncated == (tokenizer.count(full) > cap)
    if result.truncated:
        assert result.removed_nodes or result.cut_nodes or result.marker
        assert tree.preferences.truncation_strategy != "stopAtLimit"
    else:
        assert not result.removed_nodes and not result.cut_nodes

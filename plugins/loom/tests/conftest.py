"""Fixtures for the loom tests: the story tree (branches, versions, excluded and pruned nodes,
an annotation edge and a multi-source edge), a plain chain of nodes, an edge builder and a
config for a Claude model."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from attrs import evolve
from lamina_loom import (
    Edge,
    EdgeSource,
    Node,
    NodeImage,
    NodeMetadata,
    NodeVersion,
    Preferences,
    Tree,
)

from lamina import LaminaConfig, ModelInfo, hookimpl

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def make_edge(
    eid: str, parent: str, target: str, *, kind: str = "continuation", **roles: str
) -> Edge:
    """An edge parent → target; extra sources as ``context="x"`` / ``instruction="y"``."""
    sources = [EdgeSource(node=parent, role="primary")]
    sources += [EdgeSource(node=n, role=r) for r, n in roles.items()]
    return Edge(id=eid, target=target, sources=tuple(sources), kind=kind)  # type: ignore[arg-type]


def build_story(
    *,
    preferences: Preferences | None = None,
    buffer_system: bool = False,
    system_context: str = "Keep it for children.",
) -> Tree:
    """Path r a b c d e f g h k (c pruned, h excluded); a2 a branch; note an annotation of d;
    the edge into g has img as context and ins as instruction."""
    nodes = [
        Node(
            id="r",
            author_type="human",
            content="Once upon a time,",
            metadata=NodeMetadata(author="ann", created_at=T0),
        ),
        Node(id="a", author_type="model", content=" there was a fox."),
        Node(id="a2", author_type="model", content=" there was a bear."),
        Node(
            id="b",
            author_type="human",
            content=" Tell me more.",
            metadata=NodeMetadata(
                versions=(
                    NodeVersion(content=" Tell me more!"),
                    NodeVersion(content=" Tell me everything."),
                )
            ),
        ),
        Node(
            id="c",
            author_type="model",
            content=" It was quick.",
            metadata=NodeMetadata(pruned=True),
        ),
        Node(
            id="d",
            author_type="model",
            content=" It was red.",
            metadata=NodeMetadata(
                versions=(
                    NodeVersion(content=" It was red and small."),
                    NodeVersion(content=" It was crimson."),
                ),
                active_version=0,
            ),
        ),
        Node(id="e", author_type="human", content=" What did it eat?"),
        Node(id="f", author_type="human", content=" Answer briefly."),
        Node(
            id="img",
            author_type="human",
            image=NodeImage(media_type="image/png", url="https://example.org/fox.png"),
        ),
        Node(id="ins", author_type="human", content="Answer as a poet."),
        Node(id="g", author_type="model", content=" It ate berries."),
        Node(
            id="h", author_type="human", content=" And then?", metadata=NodeMetadata(excluded=True)
        ),
        Node(id="k", author_type="model", content=" Then it slept.", local_id="K1"),
        Node(id="note", author_type="human", content="Editor: check facts."),
        Node(id="q", author_type="human", content=" Is that true?"),
    ]
    edges = [
        make_edge("e-a", "r", "a"),
        make_edge("e-a2", "r", "a2"),
        make_edge("e-b", "a", "b"),
        make_edge("e-c", "b", "c"),
        make_edge("e-d", "c", "d"),
        make_edge("e-e", "d", "e"),
        make_edge("e-f", "e", "f"),
        make_edge("e-g", "f", "g", context="img", instruction="ins"),
        make_edge("e-h", "g", "h"),
        make_edge("e-k", "h", "k"),
        make_edge("e-note", "d", "note", kind="annotation"),
        make_edge("e-q", "note", "q"),
    ]
    return Tree(
        id="story",
        name="Fox story",
        system_context=system_context,
        buffer_mode_system_context=buffer_system,
        preferences=preferences or Preferences(),
        nodes=tuple(nodes),
        edges=tuple(edges),
    )


def build_chain(count: int = 10, *, system_context: str = "SSSSSSS", **tree: object) -> Tree:
    """``n01 … n<count>`` alternating human/model, each ``"Node NN says hi."`` (16 characters,
    4 estimated tokens); ``system_context`` 7 characters (2 tokens)."""
    nodes = tuple(
        Node(
            id=f"n{i:02d}",
            author_type="human" if i % 2 else "model",
            content=f"Node {i:02d} says hi.",
        )
        for i in range(1, count + 1)
    )
    edges = tuple(make_edge(f"e{i:02d}", f"n{i - 1:02d}", f"n{i:02d}") for i in range(2, count + 1))
    return Tree(id="chain", system_context=system_context, nodes=nodes, edges=edges, **tree)  # type: ignore[arg-type]


class Unframed:
    """Claude as the Loom design's examples count it: content tokens only, no per-message
    framing (the kernel charges Claude a default framing; its tests cover that), so the
    budgets of the truncation tests can be worked out by hand."""

    @hookimpl(tryfirst=True)
    def lamina_model_info(self, model: str) -> ModelInfo | None:
        if model != "claude-sonnet-4":
            return None
        return ModelInfo(
            name=model, context_window=200_000, max_output=64_000, provider="anthropic"
        )


def claude_config(**budget: int) -> LaminaConfig:
    """Defaults for a Claude model (estimated tokens), no tool reserve."""
    config = LaminaConfig(model="claude-sonnet-4")
    return evolve(config, budget=evolve(config.budget, reserve_tools=0, **budget))


@pytest.fixture(scope="session")
def edge() -> Callable[..., Edge]:
    """``edge(id, parent, target, kind=..., context=..., instruction=...)``."""
    return make_edge


@pytest.fixture(scope="session")
def story() -> Callable[..., Tree]:
    """``story(preferences=..., buffer_system=..., system_context=...)``: the story tree."""
    return build_story


@pytest.fixture(scope="session")
def chain() -> Callable[..., Tree]:
    """``chain(count=10, system_context=..., **tree)``: ``n01 … n<count>``."""
    return build_chain


@pytest.fixture(scope="session")
def loom_config() -> Callable[..., LaminaConfig]:
    """``loom_config(**budget)``: a Claude model's config with no tool reserve."""
    return claude_config


@pytest.fixture(scope="session")
def unframed() -> tuple[tuple[str, object], ...]:
    """Plugins for ``Loom(..., plugins=unframed)``: Claude without per-message framing."""
    return (("unframed", Unframed()),)

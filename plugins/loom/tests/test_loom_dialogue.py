"""Dialogue mode: system context order, multi-source edges, exclusion, merging, the Loom design's
truncation strategies and guarantees, per-tree preferences, system delivery."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
from lamina_loom import (
    Loom,
    LoomError,
    MemoryStore,
    OperationalMemory,
    Preferences,
    Stash,
    Tree,
)
from lamina_loom.dialogue import DialogueOptions, plan_dialogue
from lamina_loom.render import (
    ADDENDUM_HEAD,
    ADDENDUM_LOOM_CONTEXT,
    ADDENDUM_MEMORY,
    ADDENDUM_NODE_METADATA,
)
from lamina_loom.settings import Settings

from lamina import Adapter, BudgetError, ImagePart, Message, TextPart, Usage, hookimpl

AGENT = "You are a storyteller."
SYSTEM = "You are a storyteller.\n\nKeep it for children.\n\nAnswer as a poet."


@pytest.fixture(scope="session")
def loom_for(loom_config, unframed):  # type: ignore[no-untyped-def]
    """``loom_for(tree, config=None, **kwargs)``: a Loom over the tree (Claude by default,
    counted without per-message framing, as the Loom design's examples are)."""

    def make(tree, config=None, **kwargs) -> Loom:  # type: ignore[no-untyped-def]
        config = config or loom_config()
        kwargs.setdefault("plugins", unframed)
        return Loom(MemoryStore([tree]), config=config, entry_points=False, **kwargs)

    return make


def texts(result):
    return [(m.role, m.text) for m in result.messages]


def test_story_messages_exactly(loom_for, story):
    result = loom_for(story()).dialogue("story", "k", agent_system=AGENT)
    # agent-level first, then tree-level, then the instruction source of the edge into g
    assert result.system == SYSTEM
    assert result.context.system_prompt == SYSTEM
    assert result.system_delivery == "field"
    assert result.messages == (
        Message(
            role="user",
            content=(TextPart(text="Once upon a time,"),),
            context_json={"loom": {"tree": "story", "nodes": ["r"]}},
        ),
        Message(
            role="assistant",
            content=(TextPart(text=" there was a fox."),),
            context_json={"loom": {"tree": "story", "nodes": ["a"]}},
        ),
        Message(
            role="user",
            content=(TextPart(text=" Tell me more."),),
            context_json={"loom": {"tree": "story", "nodes": ["b"]}},
        ),
        # c is pruned: d follows b directly
        Message(
            role="assistant",
            content=(TextPart(text=" It was red."),),
            context_json={"loom": {"tree": "story", "nodes": ["d"]}},
        ),
        # e and f are consecutive human nodes (merged); the context image of the edge into g
        # goes before its primary source f
        Message(
            role="user",
            content=(
                TextPart(text=" What did it eat?"),
                ImagePart(media_type="image/png", url="https://example.org/fox.png"),
                TextPart(text=" Answer briefly."),
            ),
            context_json={"loom": {"tree": "story", "nodes": ["e", "img", "f"]}},
        ),
        # h is excluded: g and k are consecutive model nodes (merged)
        Message(
            role="assistant",
            content=(TextPart(text=" It ate berries.\n\n Then it slept."),),
            context_json={"loom": {"tree": "story", "nodes": ["g", "k"]}},
        ),
    )
    assert result.excluded_nodes == (("c", "pruned"), ("h", "excluded"))
    assert not result.truncated and result.removed_nodes == ()
    # the branch a2 and the annotation are not on the path
    assert "bear" not in str(result.messages) and "Editor" not in str(result.messages)


def test_agent_level_comes_from_settings_when_not_given(loom_config, loom_for, story):
    config = loom_config()
    from attrs import evolve

    config = evolve(config, sections={"loom": {"agent_system_prompt": "Agent says."}})
    result = loom_for(story(), config).dialogue("story", "k")
    assert result.system == "Agent says.\n\nKeep it for children.\n\nAnswer as a poet."


def test_annotation_nodes_are_left_out_unless_included(loom_for, story):
    loom = loom_for(story())
    result = loom.dialogue("story", "q")
    assert ("note", "annotation") in result.excluded_nodes
    assert texts(result)[-2:] == [("assistant", " It was red."), ("user", " Is that true?")]
    result = loom.dialogue("story", "q", include=["note"])
    assert texts(result)[-1] == ("user", "Editor: check facts.\n\n Is that true?")
    assert ("note", "annotation") not in result.excluded_nodes


def test_explicitly_included_annotation_via_metadata(loom_for, story):
    from attrs import evolve

    tree = story()
    nodes = tuple(
        evolve(n, metadata=evolve(n.metadata, included=True)) if n.id == "note" else n
        for n in tree.nodes
    )
    result = loom_for(evolve(tree, nodes=nodes)).dialogue("story", "note")
    assert texts(result)[-1] == ("user", "Editor: check facts.")


def test_instruction_from_a_model_node_is_untrusted_and_fenced(loom_for, story):
    from attrs import evolve

    tree = story(system_context="")
    nodes = tuple(evolve(n, author_type="model") if n.id == "ins" else n for n in tree.nodes)
    result = loom_for(evolve(tree, nodes=nodes)).dialogue("story", "k", agent_system=AGENT)
    assert result.system == "You are a storyteller.\n\n```\nAnswer as a poet.\n```"


def test_first_message_delivery_for_providers_without_a_system_field(loom_for, story):
    class NoSystem:
        @hookimpl
        def lamina_adapters(self):
            return [
                Adapter(
                    name="nosys",
                    build_request=lambda ctx, opts: {
                        "system": ctx.system_prompt,
                        "messages": [[m.role, m.text] for m in ctx.history],
                    },
                    parse_usage=lambda r: Usage(),
                    native_system=False,
                ),
                Adapter(
                    name="withsys",
                    build_request=lambda ctx, opts: {"system": ctx.system_prompt},
                    parse_usage=lambda r: Usage(),
                ),
            ]

    loom = loom_for(story(), plugins=[("nosys", NoSystem())])
    result = loom.dialogue("story", "b", agent_system=AGENT, provider="nosys")
    assert result.system_delivery == "first_message"
    # at b the instruction source of the edge into g is not on the path
    short = "You are a storyteller.\n\nKeep it for children."
    assert texts(result) == [
        ("system", short),
        ("user", "Once upon a time,"),
        ("assistant", " there was a fox."),
        ("user", " Tell me more."),
    ]
    assert loom.payload(result, "nosys") == {
        "system": "",
        "messages": [
            ["system", short],
            ["user", "Once upon a time,"],
            ["assistant", " there was a fox."],
            ["user", " Tell me more."],
        ],
    }
    result = loom.dialogue("story", "b", agent_system=AGENT, provider="withsys")
    assert result.system_delivery == "field" and texts(result)[0] == ("user", "Once upon a time,")
    with pytest.raises(Exception, match="no adapter for provider 'ghost'"):
        loom.dialogue("story", "b", provider="ghost")


def test_node_metadata_inline_and_loom_blocks(loom_config, loom_for, story):
    from attrs import evolve

    config = evolve(
        loom_config(),
        sections={
            "loom": {"node_metadata": True, "loom_context": True, "operational_memory": True}
        },
    )
    memory = OperationalMemory(
        pinned=("The fox is red.",),
        stashes=(Stash(name="plot", content="fox sleeps"),),
        trace=("read node d", "branched at g"),
    )
    result = loom_for(story(), config).dialogue(
        "story", "k", permissions=["read", "branch"], memory=memory
    )
    assert result.messages[0].text == (
        "[loom node=r author=human:ann created=2026-01-01T12:00:00+00:00 parent=none "
        "children=a,a2]\nOnce upon a time,"
    )
    assert result.messages[5].text == (
        "[loom node=g author=model parent=f children=h]\n It ate berries.\n\n"
        "[loom node=K1 author=model parent=h children=none]\n Then it slept."
    )
    # operational memory, then the loom context block, at the end of the context
    assert result.context.current_message.text == (
        "## Operational memory\n\n```\nPinned:\n- The fox is red.\nRecalled stashes:\n"
        "- plot: fox sleeps\nAction trace:\n1. read node d\n2. branched at g\n```\n\n"
        "## Loom context\n\n```\nTree: Fox story (story)\n"
        "Position: node K1 at depth 10 (parent: h; siblings: 0; children: none)\n"
        "Permissions: read, branch\n```"
    )
    assert result.messages[-1] == result.context.current_message


class CountedEdges(tuple):  # type: ignore[type-arg]
    """A tree's edges that count how often they are walked."""

    walks = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        CountedEdges.walks += 1
        return super().__iter__()


def test_metadata_lines_find_children_without_walking_every_edge():
    """Each node's metadata line names its children: a tree indexes them when it is built,
    so a path's lines cost what the path holds, not the path times the edges."""
    from lamina_loom import Edge, EdgeSource, Node

    nodes = [Node(id=f"n{i}", author_type="human", content=f"turn {i}") for i in range(300)]
    nodes.append(Node(id="side", author_type="model", content="a branch"))
    edges = [
        Edge(id=f"e{i}", target=f"n{i}", sources=(EdgeSource(node=f"n{i - 1}"),))
        for i in range(1, 300)
    ]
    edges.append(Edge(id="e-side", target="side", sources=(EdgeSource(node="n0"),)))
    tree = Tree(id="long", nodes=tuple(nodes), edges=CountedEdges(edges))
    assert tree.children("n0") == ("n1", "side") and tree.children("n299") == ()
    assert tree.children("side") == ()
    settings = Settings(node_metadata=True, loom_context=True)
    CountedEdges.walks = 0
    plan = plan_dialogue(tree, "n299", DialogueOptions(settings=settings))
    assert CountedEdges.walks <= 2  # (not once per node)
    assert (
        plan.messages[0]
        .parts[0]
        .text.startswith(  # type: ignore[union-attr]
            "[loom node=n0 author=human parent=none children=n1,side]\nturn 0"
        )
    )


def with_loom(loom_config, **section):  # type: ignore[no-untyped-def]
    from attrs import evolve

    return evolve(loom_config(), sections={"loom": section})


def test_the_loom_aware_addendum_explains_the_extensions_that_are_on(loom_for, loom_config, story):
    config = with_loom(loom_config, node_metadata=True, loom_context=True)
    result = loom_for(story(), config).dialogue("story", "k", agent_system=AGENT)
    addendum = ADDENDUM_HEAD + "\n\n" + ADDENDUM_NODE_METADATA + "\n" + ADDENDUM_LOOM_CONTEXT
    # agent, tree, the addendum (static: inside the cached prefix), then the instruction
    assert result.system == (
        f"You are a storyteller.\n\nKeep it for children.\n\n{addendum}\n\nAnswer as a poet."
    )
    assert "[loom node=<id> author=<human|model>[:<name>] [created=<time>]" in addendum
    assert "Operational memory" not in addendum  # that extension is off
    # it describes the header the messages carry
    assert result.messages[0].text.startswith("[loom node=r author=human:ann created=")


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({}, None),  # no extension, no addendum
        ({"node_metadata": True, "addendum": False}, None),
        ({"addendum": True}, "HEAD"),
        ({"operational_memory": True}, "HEAD\n\nMEMORY"),
        ({"node_metadata": True, "addendum_text": "Nodes carry ids."}, "Nodes carry ids."),
    ],
)
def test_the_addendum_is_configurable(loom_for, loom_config, story, section, expected):
    result = loom_for(story(), with_loom(loom_config, **section)).dialogue(
        "story", "k", agent_system=AGENT
    )
    if expected is None:
        assert result.system == SYSTEM
        return
    text = expected.replace("HEAD", ADDENDUM_HEAD).replace("MEMORY", ADDENDUM_MEMORY)
    assert result.system == (
        f"You are a storyteller.\n\nKeep it for children.\n\n{text}\n\nAnswer as a poet."
    )


def test_the_addendum_keeps_the_system_prompt_byte_stable_along_the_path(
    loom_for, loom_config, story
):
    loom = loom_for(story(), with_loom(loom_config, node_metadata=True))
    a = loom.dialogue("story", "b", agent_system=AGENT).context.system_prompt
    b = loom.dialogue("story", "d", agent_system=AGENT).context.system_prompt
    assert a == b and ADDENDUM_HEAD in a


def test_extensions_are_off_by_default(loom_for, story):
    result = loom_for(story()).dialogue(
        "story", "k", memory=OperationalMemory(pinned=("x",)), permissions=["read"]
    )
    assert result.context.current_message.text == ""
    assert not result.messages[0].text.startswith("[loom")


# -- truncation ---------------------------------------------------------------------------
# chain(): system 2 tokens (the kernel charges 3 while fitting: a system block pays for its
# separator), ten 4-token messages (n01 human, n02 model, ...). While choosing, the kernel
# prices the gap marker for all 10 messages ("[… 10 earlier messages omitted …]", 33
# characters: 9 tokens); the marker it inserts names the real count ("[… 4 …]", 8 tokens).
# With 36 available the history gets 33: the newest 4 nodes (16) + marker (9) leave 8, half
# of it for the head (n01), the rest for the tail (n06).


@pytest.fixture(scope="session")
def chain_loom(loom_for, chain):  # type: ignore[no-untyped-def]
    """``chain_loom(**prefs)``: a Loom over ``chain()`` with these preferences, no buffer."""

    def make(**prefs) -> Loom:  # type: ignore[no-untyped-def]
        return loom_for(chain(preferences=Preferences(token_buffer=0, **prefs)))

    return make


def ids(result):
    return [
        m.context_json["loom"]["nodes"][0] if m.context_json else m.text for m in result.messages
    ]


def test_fits_without_cuts(chain_loom):
    result = chain_loom().dialogue("chain", "n10", max_tokens=43)
    assert not result.truncated and len(result.messages) == 10
    assert result.context.token_budget.used.total == 42


def test_the_kernels_framing_is_charged_for_every_message(chain, loom_for):
    # Without the test plugin Claude gets the kernel's default framing: per message (the
    # system message and the ten kept ones) and for the reply, on top of the content's 42.
    loom = loom_for(chain(preferences=Preferences(token_buffer=0)), plugins=())
    info = loom.assembler("truncateMiddle", 4, 0).model("claude-sonnet-4").info
    assert info.message_overhead > 0 and info.reply_overhead > 0
    result = loom.dialogue("chain", "n10")
    framing = info.message_overhead * (1 + 10 + 1) + info.reply_overhead
    assert result.context.token_budget.used.total == 42 + framing


def test_truncate_middle_keeps_head_and_four_recent_nodes_with_a_marker(chain_loom):
    result = chain_loom().dialogue("chain", "n10", max_tokens=36)
    assert result.strategy == "truncateMiddle"
    assert ids(result) == [
        "n01",
        "[… 4 earlier messages omitted …]",
        "n06",
        "n07",
        "n08",
        "n09",
        "n10",
    ]
    assert result.truncated and result.removed_nodes == ("n02", "n03", "n04", "n05")
    assert result.context.system_prompt == "SSSSSSS"
    assert result.context.token_budget.used.total == 34


def test_rolling_window_keeps_the_newest(chain_loom):
    result = chain_loom(truncation_strategy="rollingWindow").dialogue("chain", "n10", max_tokens=36)
    assert ids(result) == [
        "[… 4 earlier messages omitted …]",
        "n05",
        "n06",
        "n07",
        "n08",
        "n09",
        "n10",
    ]
    assert result.removed_nodes == ("n01", "n02", "n03", "n04")


def test_stop_at_limit_lists_what_would_have_to_go(chain_loom):
    loom = chain_loom(truncation_strategy="stopAtLimit")
    with pytest.raises(BudgetError, match=r"would have to go: loom:n01, loom:n02\b"):
        loom.dialogue("chain", "n10", max_tokens=36)
    assert not loom.dialogue("chain", "n10", max_tokens=43).truncated


def test_minimum_recent_nodes_counts_nodes_not_messages(chain, loom_for):
    # n09 and n10 merged (both human): the newest 4 nodes are n07..n10 in 3 messages
    from attrs import evolve

    tree = chain(preferences=Preferences(token_buffer=0, minimum_recent_nodes=4))
    nodes = tuple(evolve(n, author_type="human") if n.id == "n10" else n for n in tree.nodes)
    result = loom_for(evolve(tree, nodes=nodes)).dialogue("chain", "n10", max_tokens=30)
    assert ids(result)[-3:] == ["n07", "n08", "n09"]
    assert result.messages[-1].context_json["loom"]["nodes"] == ["n09", "n10"]


def test_protected_recent_nodes_that_do_not_fit_are_an_error(chain_loom):
    with pytest.raises(BudgetError, match="what must not be cut"):
        chain_loom().dialogue("chain", "n10", max_tokens=17)


def test_system_alone_over_the_limit_is_its_own_error(chain_loom):
    with pytest.raises(BudgetError, match="the system context alone needs 2 tokens but only 1"):
        chain_loom().dialogue("chain", "n10", max_tokens=1)


def test_at_least_one_message_even_with_zero_recent_nodes(chain_loom):
    result = chain_loom(truncation_strategy="rollingWindow", minimum_recent_nodes=0).dialogue(
        "chain", "n10", max_tokens=7
    )
    assert ids(result) == ["n10"]
    assert result.removed_nodes == tuple(f"n{i:02d}" for i in range(1, 10))


def test_token_buffer_is_reserved_for_the_response(chain, loom_config, loom_for):
    tree = chain(preferences=Preferences(token_buffer=1024))
    config = loom_config(context_window=1024 + 34)
    result = loom_for(tree, config).dialogue("chain", "n10")
    budget = result.context.token_budget
    assert (budget.reserve_response, budget.available) == (1024, 34)
    assert result.truncated and result.preferences.token_buffer == 1024


def test_app_level_preferences_and_per_tree_overrides(chain, loom_config, loom_for, unframed):
    app = Preferences(truncation_strategy="rollingWindow", token_buffer=0)
    loom = Loom(
        MemoryStore(
            [
                chain(),
                chain(preferences=Preferences(truncation_strategy="truncateMiddle")).__class__(
                    **{
                        **{
                            f: getattr(chain(), f)
                            for f in ("name", "system_context", "nodes", "edges")
                        },
                        "id": "override",
                        "preferences": Preferences(truncation_strategy="truncateMiddle"),
                    }
                ),
            ]
        ),
        config=loom_config(),
        preferences=app,
        plugins=unframed,
        entry_points=False,
    )
    assert loom.dialogue("chain", "n10", max_tokens=36).strategy == "rollingWindow"
    override = loom.dialogue("override", "n10", max_tokens=36)
    assert override.strategy == "truncateMiddle" and ids(override)[0] == "n01"
    # [plugins.loom] is the app level when the host passes none
    from attrs import evolve

    config = evolve(
        loom_config(), sections={"loom": {"truncation_strategy": "stopAtLimit", "token_buffer": 0}}
    )
    with pytest.raises(BudgetError):
        loom_for(chain(), config).dialogue("chain", "n10", max_tokens=36)


def test_unknown_strategy_names_the_tree(chain, loom_for):
    loom = loom_for(chain(preferences=Preferences(truncation_strategy="rolling")))
    with pytest.raises(LoomError, match="loom tree 'chain': unknown truncation_strategy 'rolling'"):
        loom.dialogue("chain", "n10")


def test_everything_excluded_is_an_error(chain, loom_for):
    from attrs import evolve

    tree = chain(count=2)
    nodes = tuple(evolve(n, metadata=evolve(n.metadata, excluded=True)) for n in tree.nodes)
    with pytest.raises(LoomError, match="nothing to assemble"):
        loom_for(evolve(tree, nodes=nodes)).dialogue("chain", "n02")


def test_cut_loom_blocks_show_in_the_flags(loom_config, loom_for, story):
    from attrs import evolve

    config = evolve(
        loom_config(), sections={"loom": {"loom_context": True, "operational_memory": True}}
    )
    loom = loom_for(story(preferences=Preferences(token_buffer=0)), config)
    memory = OperationalMemory(pinned=("a long pinned note " * 20,))
    full = loom.dialogue("story", "k", memory=memory)
    assert not full.truncated and full.dropped_blocks == ()
    cap = full.context.token_budget.used.total - 20
    cut = loom.dialogue("story", "k", memory=memory, max_tokens=cap)
    # the operational memory is cut before any history (its layer has the lowest cut rank)
    assert cut.truncated and cut.dropped_blocks == ("loom:memory",)
    assert cut.removed_nodes == ()
    assert cut.context.token_budget.used.total <= cap


class _Loads(MemoryStore):
    """A store that counts its loads."""

    loads = 0

    def load(self, tree_id: str) -> Tree:
        self.loads += 1
        return super().load(tree_id)


def test_dialogue_loads_and_plans_the_tree_once(loom_config, story, unframed, monkeypatch):
    """``Loom.dialogue`` hands the plan it made to its provider (the tree was loaded twice, and
    planned twice, on every call); what it assembles is what the provider would have planned,
    with the config's permissions when the call gives none."""
    from attrs import evolve

    config = evolve(loom_config(), permissions=("read",), sections={"loom": {"loom_context": True}})
    store = _Loads([story()])
    loom = Loom(store, config=config, plugins=unframed, entry_points=False)
    result = loom.dialogue("story", "k")
    assert store.loads == 1
    assert "Permissions: read" in result.context.current_message.text
    monkeypatch.setattr(
        "lamina_loom.plugin.LoomPlugin.given", lambda self, request, plan: nullcontext()
    )
    planned_again = loom.dialogue("story", "k")
    assert store.loads == 3  # without the handoff: the provider loads it again
    same = ("system_prompt", "history", "current_message", "token_budget")
    assert [getattr(planned_again.context, f) for f in same] == [
        getattr(result.context, f) for f in same
    ]
    assert planned_again.context.report.blocks == result.context.report.blocks
    assert planned_again.excluded_nodes == result.excluded_nodes
    assert planned_again.messages == result.messages

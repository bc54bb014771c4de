"""Buffer mode: one document, versions resolved, working buffer appended, system context only
when the tree enables it, truncation on token boundaries with the Loom design's guarantees."""

from __future__ import annotations

import pytest
from attrs import evolve
from lamina_loom import Loom, LoomError, MemoryStore, Preferences

from lamina import BudgetError

STORY = (
    "Once upon a time, there was a fox. Tell me everything. It was red and small."
    " What did it eat? Answer briefly. It ate berries. Then it slept."
)


@pytest.fixture(scope="session")
def loom_for(loom_config):  # type: ignore[no-untyped-def]
    """``loom_for(*trees, config=None)``: a Loom over the trees (the Claude config by default)."""

    def make(*trees, config=None) -> Loom:  # type: ignore[no-untyped-def]
        return Loom(MemoryStore(list(trees)), config=config or loom_config(), entry_points=False)

    return make


def test_story_document_exactly(loom_for, story):
    result = loom_for(story()).buffer("story", "k", working_buffer=" Zzz")
    # b shows its newest version, d its active version 0; c (pruned) and h (excluded) are
    # out; the system context is excluded by default; the working buffer comes last
    assert result.document == STORY + " Zzz"
    assert result.nodes == ("r", "a", "b", "d", "e", "img", "f", "g", "k")
    assert not result.system_included and result.working_buffer and not result.truncated
    assert result.excluded_nodes == (("c", "pruned"), ("h", "excluded"))
    assert result.warnings == ("node 'img': image left out (buffer mode is text only)",)
    assert result.tokens == 36 and result.tokenizer == "estimate-4cpt" and not result.exact


def test_system_context_when_the_tree_enables_it(loom_for, story):
    result = loom_for(story(buffer_system=True)).buffer(
        "story", "k", agent_system="You are a storyteller."
    )
    assert result.system_included
    assert result.document == (
        "You are a storyteller.\n\nKeep it for children.\n\nAnswer as a poet.\n\n" + STORY
    )


def test_separators_are_configurable(chain, loom_config, loom_for):
    config = evolve(loom_config(), sections={"loom": {"buffer_separator": "|"}})
    result = loom_for(chain(count=3), config=config).buffer("chain", "n03", working_buffer="W")
    assert result.document == "Node 01 says hi.|Node 02 says hi.|Node 03 says hi.|W"


# chain(): ten nodes of 16 characters (4 estimated tokens); the newest 4 (64 characters) are
# protected; the cuttable text is n01..n06 (96 characters). The estimate tokenizer's tokens
# start every 4 characters. 30 tokens allow 120 characters.


@pytest.fixture(scope="session")
def chain_loom(loom_for, chain):  # type: ignore[no-untyped-def]
    """``chain_loom(**prefs)``: a Loom over ``chain()`` with these preferences, no buffer."""

    def make(**prefs) -> Loom:  # type: ignore[no-untyped-def]
        return loom_for(chain(preferences=Preferences(token_buffer=0, **prefs)))

    return make


def node(i: int) -> str:
    return f"Node {i:02d} says hi."


def test_fits_without_cuts(chain_loom):
    result = chain_loom().buffer("chain", "n10", max_tokens=40)
    assert result.document == "".join(node(i) for i in range(1, 11))
    assert not result.truncated and result.tokens == 40


def test_truncate_middle_cuts_the_middle_on_token_boundaries(chain_loom):
    result = chain_loom().buffer("chain", "n10", max_tokens=30)
    # 9 tokens of the cuttable text fit beside the 17-character marker: 5 at the head
    # (20 characters: n01 and 4 characters of n02), 4 at the tail (n06)
    assert result.document == (
        node(1) + "Node" + "\n[… truncated …]\n" + node(6) + "".join(node(i) for i in range(7, 11))
    )
    assert result.truncated and result.tokens == 30
    assert result.removed_nodes == ("n03", "n04", "n05") and result.cut_nodes == ("n02",)
    assert result.marker == "\n[… truncated …]\n"


def test_rolling_window_keeps_the_most_recent_text(chain_loom):
    result = chain_loom(truncation_strategy="rollingWindow").buffer("chain", "n10", max_tokens=30)
    # the 14-character marker, then the last 40 characters of the cuttable text
    assert result.document == (
        "[truncated …]\n" + "says hi." + "".join(node(i) for i in range(5, 11))
    )
    assert result.removed_nodes == ("n01", "n02", "n03") and result.cut_nodes == ("n04",)
    assert result.tokens == 30


def test_stop_at_limit_refuses_and_lists_what_would_go(chain_loom):
    with pytest.raises(BudgetError, match=r"would have to remove: n01, n02 \(and part of n03\)"):
        chain_loom(truncation_strategy="stopAtLimit").buffer("chain", "n10", max_tokens=30)


def test_working_buffer_and_recent_nodes_are_never_cut(chain_loom):
    result = chain_loom().buffer("chain", "n10", working_buffer="WXYZ", max_tokens=21)
    assert result.document.endswith("".join(node(i) for i in range(7, 11)) + "WXYZ")
    with pytest.raises(BudgetError, match=r"newest 4 node\(s\) and the working buffer need 17"):
        chain_loom().buffer("chain", "n10", working_buffer="WXYZ", max_tokens=16)


def test_no_room_for_the_marker_drops_the_whole_middle(chain_loom):
    result = chain_loom().buffer("chain", "n10", max_tokens=17)
    assert result.document == "".join(node(i) for i in range(7, 11))
    assert result.removed_nodes == tuple(f"n{i:02d}" for i in range(1, 7))
    assert result.truncated and result.marker is None


def test_system_context_is_never_cut_and_alone_over_is_an_error(chain, loom_for):
    tree = chain(preferences=Preferences(token_buffer=0), buffer_mode_system_context=True)
    result = loom_for(tree).buffer("chain", "n10", max_tokens=30)
    assert result.document.startswith("SSSSSSS\n\n")
    assert result.tokens <= 30
    with pytest.raises(BudgetError, match="the system context alone needs 3 tokens but only 2"):
        loom_for(tree).buffer("chain", "n10", max_tokens=2)


def test_token_buffer_comes_off_the_window(chain, loom_config, loom_for):
    tree = chain(preferences=Preferences(token_buffer=1000))
    result = loom_for(tree, config=loom_config(context_window=1030)).buffer("chain", "n10")
    assert result.available == 30 and result.truncated
    with pytest.raises(LoomError, match="leave nothing"):
        loom_for(tree, config=loom_config(context_window=1000)).buffer("chain", "n10")


def test_versions_out_of_range_are_an_error(loom_for, story):
    tree = story()
    nodes = tuple(
        evolve(n, metadata=evolve(n.metadata, active_version=5)) if n.id == "d" else n
        for n in tree.nodes
    )
    with pytest.raises(LoomError, match="node 'd' has active_version 5 but 2 version"):
        loom_for(evolve(tree, nodes=nodes)).buffer("story", "k")


def test_unknown_strategy_in_buffer_mode(chain_loom):
    with pytest.raises(LoomError, match="buffer mode has no truncation strategy 'nope'"):
        chain_loom(truncation_strategy="nope").buffer("chain", "n10")

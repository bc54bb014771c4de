"""The plugin through the kernel's hooks: inert without config, dialogue blocks for a tree
named by settings or request metadata, clear errors for what cannot be honoured."""

from __future__ import annotations

import pytest
from attrs import evolve
from lamina_loom import LoomError, Preferences, tree_to_json
from lamina_loom import plugin as loom_plugin

from lamina import Assembler, BudgetError, ConfigError, LaminaConfig
from lamina.testing import make_assembler
from lamina.testing.conformance import LayerProviderConformance


@pytest.fixture
def assembler(story):  # type: ignore[no-untyped-def]
    """``assembler(tmp_path, section=None, **config)``: the loom plugin over the story tree
    in a JSON store (the store configured only with a section)."""

    def make(tmp_path, section=None, **config):  # type: ignore[no-untyped-def]
        path = tmp_path / "story.json"
        path.write_text(tree_to_json(story()), "utf-8")
        cfg = {"model": "claude-sonnet-4", "budget": {"reserve_tools": 0}, **config}
        if section is not None:
            cfg["plugins"] = {"loom": {"store": str(path), **section}}
        return make_assembler(cfg, plugins=[("loom", loom_plugin)])

    return make


def test_inert_without_config_or_metadata(tmp_path, assembler):
    a = assembler(tmp_path)
    ctx = a.assemble(a.request("hi"))
    assert ctx.history == () and ctx.system_prompt == ""
    assert not [b for b in ctx.report.blocks if b.plugin == "loom"]
    # a store alone selects nothing either
    a = assembler(tmp_path, section={})
    assert a.assemble(a.request("hi")).history == ()


def test_installed_entry_point_is_inert():
    with Assembler(LaminaConfig()) as a:
        ctx = a.assemble(a.request("hi"))
    assert not [b for b in ctx.report.blocks if b.plugin == "loom"]


def test_request_metadata_selects_tree_and_node(tmp_path, assembler):
    a = assembler(tmp_path, section={"agent_system_prompt": "Agent."})
    ctx = a.assemble(a.request("And then?", metadata={"loom": {"tree": "story", "node": "d"}}))
    assert ctx.system_prompt == "Agent.\n\nKeep it for children."
    assert [(m.role, m.text) for m in ctx.history] == [
        ("user", "Once upon a time,"),
        ("assistant", " there was a fox."),
        ("user", " Tell me more."),
        ("assistant", " It was red."),
    ]
    assert ctx.history[3].context_json == {"loom": {"tree": "story", "nodes": ["d"]}}
    assert ctx.current_message.text.endswith("And then?")


def test_hook_mode_system_prompt_carries_the_addendum(tmp_path, assembler):
    from lamina_loom.render import ADDENDUM_HEAD, ADDENDUM_LOOM_CONTEXT

    section = {"agent_system_prompt": "Agent.", "loom_context": True}
    a = assembler(tmp_path, section=section)
    ctx = a.assemble(a.request("And then?", metadata={"loom": {"tree": "story", "node": "d"}}))
    addendum = f"{ADDENDUM_HEAD}\n\n{ADDENDUM_LOOM_CONTEXT}"
    assert ctx.system_prompt == f"Agent.\n\nKeep it for children.\n\n{addendum}"
    block = next(b for b in ctx.report.blocks if b.id == "loom:system:addendum")
    assert block.layer == "loom_system" and block.status == "kept"


def test_settings_select_a_default_position(tmp_path, assembler):
    a = assembler(tmp_path, section={"tree": "story", "node": "b"})
    assert len(a.assemble(a.request("x")).history) == 3


def test_agent_level_system_precedes_tree_level_after_other_system_layers(tmp_path, assembler):
    a = assembler(
        tmp_path,
        section={"tree": "story", "node": "b", "agent_system_prompt": "Agent."},
        blocks=[{"id": "rules", "text": "Workspace rules."}],
    )
    assert a.assemble(a.request("x")).system_prompt == (
        "Workspace rules.\n\nAgent.\n\nKeep it for children."
    )


def test_incomplete_or_bad_selection_is_an_error(tmp_path, assembler):
    a = assembler(tmp_path, section={})
    with pytest.raises(LoomError, match="needs a tree and a node"):
        a.assemble(a.request("x", metadata={"loom": {"tree": "story"}}))
    with pytest.raises(LoomError, match=r"unknown keys \['nod'\]"):
        a.assemble(a.request("x", metadata={"loom": {"tree": "story", "nod": "b"}}))
    with pytest.raises(LoomError, match="node 'zz' is not in the tree"):
        a.assemble(a.request("x", metadata={"loom": {"tree": "story", "node": "zz"}}))
    a = assembler(tmp_path)  # no section: no store
    with pytest.raises(LoomError, match="no store is configured"):
        a.assemble(a.request("x", metadata={"loom": {"tree": "story", "node": "b"}}))


def test_settings_are_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown keys \['stor'\] at key plugins.loom"):
        make_assembler({"plugins": {"loom": {"stor": "x"}}}, plugins=[("loom", loom_plugin)])


def test_tree_strategy_is_the_calls_fit_strategy(tmp_path, chain):
    path = tmp_path / "chain.json"
    tree = chain(preferences=Preferences(truncation_strategy="stopAtLimit"))
    path.write_text(tree_to_json(tree), "utf-8")
    cfg = {"model": "claude-sonnet-4", "plugins": {"loom": {"store": str(path)}}}
    a = make_assembler(cfg, plugins=[("loom", loom_plugin)])
    request = a.request("x", metadata={"loom": {"tree": "chain", "node": "n10"}})
    assert a.config.fit.strategy == "truncateMiddle"
    assert a.assemble(request).report.strategy == "stopAtLimit"
    # One token short of everything: what must stay fits, so only stopAtLimit refuses.
    cap = a.assemble(request).token_budget.used.total - 1
    with pytest.raises(BudgetError, match="stopAtLimit does not cut"):
        a.assemble(evolve(request, max_tokens=cap))
    # a strategy the host picks for the call wins
    assert a.assemble(request, strategy="rollingWindow").report.strategy == "rollingWindow"


def test_tree_preferences_govern_the_call_in_hook_mode(tmp_path, chain):
    path = tmp_path / "chain.json"
    tree = chain(preferences=Preferences(minimum_recent_nodes=2, token_buffer=1024))
    path.write_text(tree_to_json(tree), "utf-8")
    cfg = {
        "model": "claude-sonnet-4",
        "fit": {"strategy": "rollingWindow", "minimum_recent": 4},
        "plugins": {"loom": {"store": str(path)}},
    }
    a = make_assembler(cfg, plugins=[("loom", loom_plugin)])
    request = a.request("x", metadata={"loom": {"tree": "chain", "node": "n10"}})
    loose = a.assemble(request)
    assert loose.token_budget.reserve_response == 1024  # the tree's token_buffer
    assert len(loose.history) == 10
    # Room for the fixed parts and the newest three messages only: [fit] minimum_recent = 4
    # cannot be met, the tree's two newest nodes can.
    sizes = [b.tokens for b in loose.report.blocks if b.layer == "session"]
    used = loose.token_budget.used
    framing = a.model("claude-sonnet-4").info.message_overhead
    cap = used.system_prompt + used.event + sum(sizes[-3:]) + 3 * framing + 4
    with pytest.raises(BudgetError, match="the last 4 turns"):
        a.assemble(evolve(request, max_tokens=cap), minimum_recent=4)  # the host's choice wins
    tight = a.assemble(evolve(request, max_tokens=cap))
    assert 2 <= len(tight.history) < 10
    assert tight.history[-1] == loose.history[-1] and tight.history[-2] == loose.history[-2]


def test_unknown_tree_strategy_in_hook_mode(tmp_path, chain):
    path = tmp_path / "chain.json"
    path.write_text(tree_to_json(chain(preferences=Preferences(truncation_strategy="x"))), "utf-8")
    a = make_assembler({"plugins": {"loom": {"store": str(path)}}}, plugins=[("loom", loom_plugin)])
    with pytest.raises(LoomError, match="unknown truncation_strategy 'x'"):
        a.assemble(a.request("x", metadata={"loom": {"tree": "chain", "node": "n10"}}))


def test_excluded_nodes_are_in_the_report(tmp_path, assembler):
    a = assembler(tmp_path, section={"tree": "story", "node": "k"})
    report = {b.id: (b.status, b.reason) for b in a.assemble(a.request("x")).report.blocks}
    assert report["loom:excluded:c"] == ("dropped", "loom node pruned")
    assert report["loom:excluded:h"] == ("dropped", "loom node excluded")


class TestLoomConformance(LayerProviderConformance):
    plugin_name = "loom"
    trusts = True  # agent- and tree-level system context are operator-authored

    @pytest.fixture(autouse=True)
    def _story(self, story):  # type: ignore[no-untyped-def]
        self.story = story

    def make_plugin(self):
        return loom_plugin

    def configure(self, workspace):
        (workspace / "story.json").write_text(tree_to_json(self.story()), "utf-8")
        return {
            "model": "claude-sonnet-4",
            "plugins": {"loom": {"store": "story.json", "tree": "story", "node": "k"}},
        }

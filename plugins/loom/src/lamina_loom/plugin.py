"""Lamina hooks of the ``loom`` plugin: its settings, its layers and the dialogue-mode layer
provider. Inert unless ``[plugins.loom]`` names a tree or a request carries ``metadata["loom"]``."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

import lamina
from lamina import (
    AssembledContext,
    AssemblyCall,
    AssemblyRequest,
    Block,
    LaminaConfig,
    LayerProvider,
    LayerSpec,
    ProviderContext,
    TokenBudget,
)
from lamina_loom.dialogue import LOOM_CONTEXT, LOOM_LAYERS, LOOM_SYSTEM, plan_blocks, plan_dialogue
from lamina_loom.errors import LoomError
from lamina_loom.model import Preferences, Tree
from lamina_loom.settings import LoomRequest, Settings, request_selection
from lamina_loom.store import TreeStore, open_store

#: The name the plugin's settings are read under (its entry point name).
PLUGIN_NAME = "loom"


class LoomPlugin:
    """The hook implementations. ``store`` binds a store object (the ``Loom`` API does so);
    without one the store comes from ``[plugins.loom] store``.

    With ``check_preferences`` (hook mode) a tree's ``truncation_strategy`` becomes the call's
    fit strategy (unless the host chose one for the call), and ``minimum_recent_nodes`` or
    ``token_buffer`` overrides that differ from the Assembler's ``[fit]``/budget are an error:
    the kernel has no per-call setting for them (``Loom`` builds one Assembler per set)."""

    def __init__(self, store: TreeStore | None = None, *, check_preferences: bool = True) -> None:
        self.store = store
        self.check_preferences = check_preferences

    @lamina.hookimpl
    def lamina_settings_class(self) -> type:
        return Settings

    @lamina.hookimpl
    def lamina_layers(self) -> Iterable[LayerSpec]:
        return LOOM_LAYERS

    @lamina.hookimpl
    def lamina_layer_providers(self) -> Iterable[LayerProvider]:
        return [
            LayerProvider(
                name="loom",
                provide=self.provide,
                layers=(LOOM_SYSTEM, "session", LOOM_CONTEXT),
                required=True,
                description="Loom Tree dialogue mode: system context and the active path",
            )
        ]

    @lamina.hookimpl(wrapper=True)
    def lamina_wrap_assembly(
        self, call: AssemblyCall
    ) -> Generator[None, AssembledContext, AssembledContext]:
        if self.check_preferences and call.strategy is None:
            call.strategy = self._tree_strategy(call)
        result = yield
        return result

    def _tree_strategy(self, call: AssemblyCall) -> str | None:
        """The strategy the request's tree prefers when it differs from ``[fit] strategy``."""
        settings = call.assembler.settings(PLUGIN_NAME)
        if not isinstance(settings, Settings):
            return None
        found = self._find(call.request, settings, call.assembler.config)
        if found is None:
            return None
        tree, _, _ = found
        wanted = tree.preferences.over(settings.preferences).truncation_strategy
        if wanted is None or wanted == call.assembler.config.fit.strategy:
            return None
        known = call.assembler.registry.fit_strategies
        if wanted not in known:
            raise LoomError(
                f"unknown truncation_strategy {wanted!r}; known: {', '.join(sorted(known))}",
                tree=tree.id,
                key="preferences.truncation_strategy",
            )
        return wanted

    def _find(
        self, request: AssemblyRequest, settings: Settings, config: LaminaConfig
    ) -> tuple[Tree, str, LoomRequest | None] | None:
        """The tree and node a request asks for (``None`` when it asks for none)."""
        chosen = request_selection(request)
        if chosen is None and settings.tree is None:
            return None  # inert: nothing asks for a tree
        tree_id = (chosen.tree if chosen else None) or settings.tree
        node_id = (chosen.node if chosen else None) or settings.node
        if tree_id is None or node_id is None:
            raise LoomError(
                f"a loom request needs a tree and a node; got tree={tree_id!r}, node={node_id!r} "
                '(set them in metadata["loom"] or [plugins.loom] tree/node)'
            )
        return self._store(config, settings).load(tree_id), node_id, chosen

    def provide(self, ctx: ProviderContext) -> list[Block]:
        settings: Settings = ctx.settings
        found = self._find(ctx.request, settings, ctx.config)
        if found is None:
            return []
        tree, node_id, chosen = found
        if self.check_preferences:
            check_preferences(tree, settings.preferences, ctx.config, ctx.budget)
        plan = plan_dialogue(
            tree,
            node_id,
            settings=settings,
            agent_system=chosen.agent_system if chosen else None,
            include=chosen.include if chosen else (),
            permissions=ctx.request.permissions,
            memory=chosen.memory if chosen else None,
        )
        for node, reason in plan.selection.excluded:
            ctx.exclude(id=f"loom:excluded:{node}", layer="session", reason=f"loom node {reason}")
        return plan_blocks(plan)

    def _store(self, config: LaminaConfig, settings: Settings) -> TreeStore:
        if self.store is not None:
            return self.store
        if settings.store is None:
            raise LoomError(
                "a request names a loom tree but no store is configured",
                file=config.path,
                key="plugins.loom.store",
            )
        return open_store(config.resolve(settings.store))


def check_preferences(
    tree: Tree, app: Preferences, config: LaminaConfig, budget: TokenBudget
) -> None:
    """Refuse preference overrides (tree, then ``[plugins.loom]``) an Assembler cannot honour:
    its minimum recent and response reserve come from ``[fit]`` and the planned budget."""
    wanted = tree.preferences.over(app)
    have: tuple[tuple[str, Any, str, Any], ...] = (
        (
            "minimum_recent_nodes",
            wanted.minimum_recent_nodes,
            "fit.minimum_recent",
            config.fit.minimum_recent,
        ),
        (
            "token_buffer",
            wanted.token_buffer,
            "budget.reserve_response",
            budget.reserve_response,
        ),
    )
    for name, value, key, current in have:
        if value is not None and value != current:
            raise LoomError(
                f"preference {name} = {value!r} differs from this Assembler's {key} = "
                f"{current!r}; set {key} in the config or assemble through lamina_loom.Loom, "
                "which applies per-tree preferences",
                tree=tree.id,
                file=config.path,
                key=key,
            )


_PLUGIN = LoomPlugin()
lamina_settings_class = _PLUGIN.lamina_settings_class
lamina_layers = _PLUGIN.lamina_layers
lamina_layer_providers = _PLUGIN.lamina_layer_providers
lamina_wrap_assembly = _PLUGIN.lamina_wrap_assembly

"""Lamina hooks of the ``loom`` plugin: its settings, its layers and the dialogue-mode layer
provider. Inert unless ``[plugins.loom]`` names a tree or a request carries ``metadata["loom"]``."""

from __future__ import annotations

import threading
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

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
)
from lamina_loom.dialogue import (
    LOOM_CONTEXT,
    LOOM_LAYERS,
    LOOM_SYSTEM,
    DialogueOptions,
    DialoguePlan,
)
from lamina_loom.errors import LoomError
from lamina_loom.model import Tree
from lamina_loom.plans import Plans
from lamina_loom.settings import LoomRequest, Settings, request_selection
from lamina_loom.store import TreeStore, open_store

#: The name the plugin's settings are read under (its entry point name).
PLUGIN_NAME = "loom"
#: Stores kept open by path in hook mode (past this many, opened afresh).
OPENED_STORES = 16


class LoomPlugin:
    """The hook implementations. ``store`` binds a store object (the ``Loom`` API does so);
    without one the store comes from ``[plugins.loom] store``.

    With ``apply_preferences`` (hook mode) the request's tree preferences (tree, then
    ``[plugins.loom] preferences``) become this call's settings, unless the host chose them
    for the call: ``truncation_strategy`` the fit strategy, ``minimum_recent_nodes`` the
    protected tail (counted in the messages that hold those nodes), ``token_buffer`` the
    response reserve."""

    def __init__(
        self,
        store: TreeStore | None = None,
        *,
        apply_preferences: bool = True,
        plans: Plans | None = None,
    ) -> None:
        self.store = store
        self.apply_preferences = apply_preferences
        #: Plans made, kept while the store hands back the same tree (shared with ``Loom``).
        self.plans = plans or Plans()
        #: The plan a caller made for the request it is assembling on this thread (``given``).
        self._given = threading.local()
        #: The stores ``[plugins.loom] store`` opened, by path: each keeps its decoded trees.
        self._opened: dict[Path, TreeStore] = {}
        self._opening = threading.Lock()

    @contextmanager
    def given(self, request: AssemblyRequest, plan: DialoguePlan) -> Iterator[None]:
        """While the caller assembles ``request`` on this thread, the provider answers it
        from ``plan`` (which the caller made from the tree it loaded, with this plugin's
        settings) instead of loading the tree and planning again: the ``Loom`` API does both
        before it assembles. A request that differs from ``request`` by the time the
        provider sees it (a wrapper changed it) is planned as usual."""
        self._given.held = (request, plan)
        try:
            yield
        finally:
            self._given.held = None

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
                from_memory=self.from_memory,
            )
        ]

    @lamina.hookimpl(wrapper=True)
    def lamina_wrap_assembly(
        self, call: AssemblyCall
    ) -> Generator[None, AssembledContext, AssembledContext]:
        if self.apply_preferences:
            self._apply_preferences(call)
        result = yield
        return result

    def _apply_preferences(self, call: AssemblyCall) -> None:
        """Set this call's strategy, protected tail and response reserve from the tree."""
        settings = call.settings(PLUGIN_NAME)
        if not isinstance(settings, Settings):
            return
        found = self._find(call.request, settings, call.config)
        if found is None:
            return
        tree, node_id, chosen = found
        wanted = tree.preferences.over(settings.preferences)
        if call.strategy is None and wanted.truncation_strategy is not None:
            known = call.kernel.strategies
            if wanted.truncation_strategy not in known:
                raise LoomError(
                    f"unknown truncation_strategy {wanted.truncation_strategy!r}; known: "
                    f"{', '.join(sorted(known))}",
                    tree=tree.id,
                    key="preferences.truncation_strategy",
                )
            call.strategy = wanted.truncation_strategy
        if call.minimum_recent is None and wanted.minimum_recent_nodes is not None:
            plan = self._plan(tree, node_id, settings, chosen, call.request.permissions)
            call.minimum_recent = plan.protected_messages(wanted.minimum_recent_nodes)
        if call.reserve_response is None and wanted.token_buffer is not None:
            call.reserve_response = wanted.token_buffer

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
        return self._blocks(
            ctx, self._plan(tree, node_id, settings, chosen, ctx.request.permissions)
        )

    def from_memory(self, ctx: ProviderContext) -> list[Block] | None:
        """The blocks of the plan ``given`` for this very request, else ``None``."""
        held: tuple[AssemblyRequest, DialoguePlan] | None = getattr(self._given, "held", None)
        if held is None or held[0] != ctx.request:
            return None
        return self._blocks(ctx, held[1])

    def _blocks(self, ctx: ProviderContext, plan: DialoguePlan) -> list[Block]:
        """The plan's blocks, its excluded nodes reported as left out."""
        for node, reason in plan.selection.excluded:
            ctx.exclude(id=f"loom:excluded:{node}", layer="session", reason=f"loom node {reason}")
        return self.plans.blocks(plan)

    def _plan(
        self,
        tree: Tree,
        node_id: str,
        settings: Settings,
        chosen: LoomRequest | None,
        permissions: Sequence[str],
    ) -> DialoguePlan:
        """The dialogue plan for the node a request chose, with its request-level options."""
        options = DialogueOptions(
            settings=settings,
            agent_system=chosen.agent_system if chosen else None,
            include=chosen.include if chosen else (),
            permissions=permissions,
            memory=chosen.memory if chosen else None,
        )
        return self.plans.plan(tree, node_id, options)

    def _store(self, config: LaminaConfig, settings: Settings) -> TreeStore:
        if self.store is not None:
            return self.store
        if settings.store is None:
            raise LoomError(
                "a request names a loom tree but no store is configured",
                file=config.path,
                key="plugins.loom.store",
            )
        path = config.resolve(settings.store)
        with self._opening:
            found = self._opened.get(path)
            if found is None:
                if len(self._opened) >= OPENED_STORES:
                    self._opened.clear()
                found = self._opened[path] = open_store(path)
            return found


_PLUGIN = LoomPlugin()
lamina_settings_class = _PLUGIN.lamina_settings_class
lamina_layers = _PLUGIN.lamina_layers
lamina_layer_providers = _PLUGIN.lamina_layer_providers
lamina_wrap_assembly = _PLUGIN.lamina_wrap_assembly

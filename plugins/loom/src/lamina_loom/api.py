"""The plugin-level API: ``Loom`` assembles a tree position in dialogue mode (through the
kernel, with the tree's own preferences) or buffer mode (one document), and says what was cut."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from attrs import evolve, frozen

from lamina import (
    AssembledContext,
    Assembler,
    BudgetError,
    ConfigError,
    LaminaConfig,
    Message,
    SerdeError,
    TextPart,
    TokenBudget,
    structure,
    unstructure,
)
from lamina_loom.buffer import BufferResult, assemble_buffer_document
from lamina_loom.dialogue import DialogueOptions
from lamina_loom.errors import LoomError
from lamina_loom.model import Preferences, Tree
from lamina_loom.plans import Plans
from lamina_loom.plugin import LoomPlugin
from lamina_loom.settings import OperationalMemory, Settings, app_preferences
from lamina_loom.store import TreeStore, open_store

SystemDelivery = Literal["field", "first_message"]


@frozen(kw_only=True)
class DialogueResult:
    """A dialogue-mode assembly: the kernel's context, what to send, and the Loom design's flags.

    ``messages`` is the Loom design's messages array: the combined system context first when the
    provider has no system field (``system_delivery == "first_message"``), then the path, then
    the current message when it has content. ``delivered`` is ``context`` laid out the same
    way, for the provider adapter."""

    context: AssembledContext
    delivered: AssembledContext
    system: str
    system_delivery: SystemDelivery
    messages: tuple[Message, ...]
    preferences: Preferences
    strategy: str
    truncated: bool
    removed_nodes: tuple[str, ...]
    excluded_nodes: tuple[tuple[str, str], ...]
    dropped_blocks: tuple[str, ...]


class Loom:
    """Assembles positions of the trees in ``store`` (a ``TreeStore``, or a path: SQLite, or a
    ``.json`` export).

    App-level preferences are ``preferences``, else ``[plugins.loom]`` in ``config``, else the
    Loom design's (truncateMiddle, 4 recent nodes, 1024 tokens); a tree's own preferences override
    them. Without ``config`` the defaults apply with no tools reserve.
    """

    def __init__(
        self,
        store: TreeStore | str | Path,
        *,
        config: LaminaConfig | None = None,
        preferences: Preferences | None = None,
        plugins: Sequence[tuple[str, object]] = (),
        entry_points: bool = True,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.store: TreeStore = store if isinstance(store, TreeStore) else open_store(store)
        if config is None:
            config = LaminaConfig()
            config = evolve(config, budget=evolve(config.budget, reserve_tools=0))
        self.config = config
        try:
            self.settings = structure(
                config.sections.get("loom", {}), Settings, file=config.path, what="loom settings"
            )
        except SerdeError as exc:
            raise LoomError(str(exc), file=config.path, key="plugins.loom") from exc
        self.preferences = app_preferences(self.settings, preferences)
        self._plugins = tuple(plugins)
        self._entry_points = entry_points
        self._clock = clock
        self._assemblers: dict[tuple[str, int, int], tuple[Assembler, LoomPlugin]] = {}
        #: Dialogue plans, shared with the plugin of each assembler (planned once per tree).
        self._plans = Plans()

    # -- assemblers ----------------------------------------------------------------------

    def assembler(self, strategy: str, minimum_recent: int, token_buffer: int) -> Assembler:
        """The kernel assembler for one preference set (built once, then reused)."""
        return self._assembler(strategy, minimum_recent, token_buffer)[0]

    def _assembler(
        self, strategy: str, minimum_recent: int, token_buffer: int
    ) -> tuple[Assembler, LoomPlugin]:
        """The assembler for one preference set and the loom plugin it runs."""
        key = (strategy, minimum_recent, token_buffer)
        found = self._assemblers.get(key)
        if found is None:
            cfg = self.config
            cfg = evolve(
                cfg,
                fit=evolve(cfg.fit, strategy=strategy, minimum_recent=minimum_recent),
                budget=evolve(cfg.budget, reserve_response=token_buffer),
                plugins=evolve(cfg.plugins, disable=(*cfg.plugins.disable, "loom", "event")),
            )
            plugin = LoomPlugin(self.store, apply_preferences=False, plans=self._plans)
            assembler = Assembler(
                cfg,
                plugins=[*self._plugins, ("loom", plugin)],
                entry_points=self._entry_points,
                clock=self._clock,
            )
            found = self._assemblers[key] = (assembler, plugin)
        return found

    def _preferences(self, tree: Tree) -> tuple[str, int, int]:
        prefs = tree.preferences.over(self.preferences)
        assert prefs.truncation_strategy is not None
        assert prefs.minimum_recent_nodes is not None and prefs.token_buffer is not None
        return prefs.truncation_strategy, prefs.minimum_recent_nodes, prefs.token_buffer

    def _base(self) -> Assembler:
        p = self.preferences
        assert p.truncation_strategy and p.minimum_recent_nodes is not None
        assert p.token_buffer is not None
        return self.assembler(p.truncation_strategy, p.minimum_recent_nodes, p.token_buffer)

    def close(self) -> None:
        for assembler, _ in self._assemblers.values():
            assembler.close()
        self._assemblers.clear()

    def __enter__(self) -> Loom:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- dialogue mode -------------------------------------------------------------------

    def dialogue(
        self,
        tree_id: str,
        node_id: str,
        *,
        model: str | None = None,
        provider: str | None = None,
        agent_system: str | None = None,
        include: Collection[str] = (),
        permissions: Sequence[str] | None = None,
        memory: OperationalMemory | None = None,
        max_tokens: int | None = None,
    ) -> DialogueResult:
        """Dialogue mode for ``node_id`` in ``tree_id``, fitted with the tree's preferences.

        ``provider`` names the adapter whose ``native_system`` decides how the system context
        is delivered (default: the model's provider, when an adapter for it is installed).
        """
        tree = self.store.load(tree_id)
        strategy, minimum, token_buffer = self._preferences(tree)
        known = self._base().kernel.strategies
        if strategy not in known:
            raise LoomError(
                f"unknown truncation_strategy {strategy!r}; known: " + ", ".join(sorted(known)),
                tree=tree.id,
                key="preferences.truncation_strategy",
            )
        options = DialogueOptions(
            settings=self.settings,
            agent_system=agent_system,
            include=include,
            # The request's: the caller's, else the config's (the provider plans with these).
            permissions=self.config.permissions if permissions is None else permissions,
            memory=memory,
        )
        plan = self._plans.plan(tree, node_id, options)
        assembler, plugin = self._assembler(
            strategy, plan.protected_messages(minimum), token_buffer
        )
        selection: dict[str, Any] = {"tree": tree.id, "node": node_id, "include": list(include)}
        if agent_system is not None:
            selection["agent_system"] = agent_system
        if memory is not None:
            selection["memory"] = unstructure(memory)
        fields: dict[str, Any] = {"metadata": {"loom": selection}, "max_tokens": max_tokens}
        if model is not None:
            fields["model"] = model
        if permissions is not None:
            fields["permissions"] = tuple(permissions)
        if provider is not None:
            fields["provider"] = provider
        request = assembler.request("", **fields)
        try:  # (the plan made here is the provider's: the tree is loaded and planned once)
            with plugin.given(request, plan):
                # Each dropped block by name: removed_nodes maps them back to nodes.
                context = assembler.assemble(request, verbose_report=True)
        except BudgetError as exc:
            self._system_alone(assembler, request.model, plan.system_text, tree, exc)
            raise
        return self._dialogue_result(
            assembler, context, plan, strategy, minimum, token_buffer, provider
        )

    def _system_alone(
        self, assembler: Assembler, model: str, system: str, tree: Tree, exc: BudgetError
    ) -> None:
        """Re-raise a budget error as the Loom design's "system context alone exceeds" when it
        is."""
        need = assembler.model(model).counter.count(system)
        if need > exc.available:
            raise BudgetError(
                f"loom tree {tree.id!r}: the system context alone needs {need} tokens but only "
                f"{exc.available} are available (over by {need - exc.available}); the system "
                "context is never truncated",
                overage=need - exc.available,
                available=exc.available,
            ) from exc

    def _dialogue_result(
        self,
        assembler: Assembler,
        context: AssembledContext,
        plan: Any,
        strategy: str,
        minimum: int,
        token_buffer: int,
        provider: str | None,
    ) -> DialogueResult:
        by_block = {m.block_id: m.nodes for m in plan.messages}
        removed: list[str] = []
        dropped: list[str] = []
        for block in context.report.blocks:
            if block.plugin != "loom" or block.status == "kept":
                continue
            if block.id.startswith("loom:excluded:"):
                continue  # left out by the Loom design's exclusion rules, not by fitting
            if block.id in by_block and block.status == "dropped":
                removed.extend(by_block[block.id])
            else:
                dropped.append(block.id)
        native = True
        if provider is not None:
            native = assembler.adapter(provider).native_system
        elif context.provider:
            try:  # the model's provider: no adapter installed means a system field is assumed
                native = assembler.adapter(context.provider).native_system
            except ConfigError:
                native = True
        system = context.system_prompt
        history = context.history
        delivered = context
        if system and not native:
            history = (Message(role="system", content=(TextPart(text=system),)), *history)
            delivered = evolve(context, system_prompt="", history=history)
        current = context.current_message
        has_current = any(not isinstance(p, TextPart) or p.text for p in current.content)
        return DialogueResult(
            context=context,
            delivered=delivered,
            system=system,
            system_delivery="field" if native else "first_message",
            messages=(*history, current) if has_current else tuple(history),
            preferences=Preferences(
                truncation_strategy=strategy,
                minimum_recent_nodes=minimum,
                token_buffer=token_buffer,
            ),
            strategy=strategy,
            truncated=bool(removed or dropped),
            removed_nodes=tuple(removed),
            excluded_nodes=plan.selection.excluded,
            dropped_blocks=tuple(dropped),
        )

    def payload(self, result: DialogueResult, provider: str, **options: Any) -> dict[str, Any]:
        """The provider request for a dialogue result, built by that provider's adapter."""
        assembler = self._base()
        return assembler.adapter(provider).build_request(result.delivered, options)

    # -- buffer mode ---------------------------------------------------------------------

    def buffer(
        self,
        tree_id: str,
        node_id: str,
        *,
        working_buffer: str = "",
        model: str | None = None,
        include: Collection[str] = (),
        agent_system: str | None = None,
        max_tokens: int | None = None,
    ) -> BufferResult:
        """Buffer mode for ``node_id`` in ``tree_id``: one document fitted to the model's
        window less the tree's token buffer (and ``max_tokens`` when given)."""
        tree = self.store.load(tree_id)
        strategy, minimum, token_buffer = self._preferences(tree)
        base = self._base()
        resolved = base.model(model or base.config.model)
        try:
            budget = TokenBudget.plan(
                model_limit=resolved.info.context_window,
                reserve_response=token_buffer,
                cap=max_tokens or base.config.budget.max_tokens,
            )
        except ValueError as exc:
            raise LoomError(str(exc), tree=tree.id, key="preferences.token_buffer") from exc
        return assemble_buffer_document(
            tree,
            node_id,
            settings=self.settings,
            preferences=Preferences(
                truncation_strategy=strategy,
                minimum_recent_nodes=minimum,
                token_buffer=token_buffer,
            ),
            # The model's memoizing counter: the same position asked for again counts the
            # same candidate documents, each tokenized once.
            tokenizer=resolved.counter,
            available=budget.available,
            working_buffer=working_buffer,
            include=include,
            agent_system=agent_system,
        )


def assemble_dialogue(
    store: TreeStore | str | Path,
    tree_id: str,
    node_id: str,
    *,
    config: LaminaConfig | None = None,
    preferences: Preferences | None = None,
    **options: Any,
) -> DialogueResult:
    """One dialogue-mode assembly (``Loom(store, ...).dialogue(tree_id, node_id, **options)``)."""
    with Loom(store, config=config, preferences=preferences) as loom:
        return loom.dialogue(tree_id, node_id, **options)


def assemble_buffer(
    store: TreeStore | str | Path,
    tree_id: str,
    node_id: str,
    *,
    config: LaminaConfig | None = None,
    preferences: Preferences | None = None,
    **options: Any,
) -> BufferResult:
    """One buffer-mode assembly (``Loom(store, ...).buffer(tree_id, node_id, **options)``)."""
    with Loom(store, config=config, preferences=preferences) as loom:
        return loom.buffer(tree_id, node_id, **options)

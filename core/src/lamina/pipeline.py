"""The assembly pipeline: gather → place → measure → fit → format → report.

An ``Assembler`` resolves its plugins once; ``assemble`` is then plain method calls on the
resolved records. Token counts are memoized by content, so re-assembling an unchanged prefix
re-tokenizes nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import evolve, field, frozen
from attrs import fields as attrs_fields

from lamina.assembly.measure import IMAGE_TOKENS, count_parts
from lamina.call import AssemblyCall, KernelView, Overrides
from lamina.config import LaminaConfig, load_config, reserves
from lamina.errors import BudgetError, ConfigError, LaminaError, PluginError, ProviderError
from lamina.fitting import Fitter, Item
from lamina.model.blocks import Block, Placement, Provenance, content_hash
from lamina.model.budget import BudgetUsage, TokenBudget
from lamina.model.context import AssembledContext
from lamina.model.messages import (
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolResultPart,
)
from lamina.model.report import (
    AssemblyReport,
    BlockReport,
    LayerReport,
    StablePrefix,
    TokenizerReport,
)
from lamina.model.request import AssemblyRequest, Event, Tool
from lamina.plugins import Attributed, PluginHost, Registry
from lamina.records import (
    Adapter,
    BlockTransform,
    Exclusion,
    FitStrategy,
    Formatter,
    LayerProvider,
    LayerSpec,
    LayerView,
    ModelInfo,
    ProviderContext,
    Summarizer,
    Tokenizer,
)
from lamina.serde import unstructure
from lamina.tokens import TokenCounter

#: How many times formatting is re-checked against the exact count before giving up.
_VERIFY_ROUNDS = 8
Progress = Callable[[str], None]


@frozen(kw_only=True)
class ResolvedModel:
    """A model resolved once: its info, tokenizer and memoizing counter, and who supplied them."""

    info: ModelInfo
    info_plugin: str
    tokenizer: Tokenizer
    tokenizer_plugin: str
    counter: TokenCounter
    revision: list[Any] = field(factory=lambda: [None])


@frozen(kw_only=True)
class Formatted:
    """The three physical layers as text and messages, with the stable prefix's hash."""

    system_prompt: str
    history: tuple[Message, ...]
    current: Message
    wrappers: tuple[str, ...]
    after_history: str
    prefix_sha256: str


class Assembler:
    """Turns ``AssemblyRequest`` s into ``AssembledContext`` s for one configuration.

    ``plugins`` registers extra plugin objects (``(name, plugin)`` pairs) besides the built-ins
    and installed entry points; ``clock`` supplies "now" when an event has no time.
    """

    def __init__(
        self,
        config: LaminaConfig | None = None,
        *,
        plugins: Sequence[tuple[str, object]] = (),
        entry_points: bool = True,
        clock: Callable[[], datetime] | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.config = config or LaminaConfig()
        self.host = PluginHost(self.config, extra=plugins, entry_points=entry_points)
        self.registry: Registry = self.host.resolve()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.progress = progress
        self._models: dict[str, ResolvedModel] = {}
        self._render_cache: dict[tuple[Any, ...], str] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._validate()
        self.kernel = KernelView(
            settings=self.host.settings,
            strategies={n: a.record for n, a in self.registry.fit_strategies.items()},
            model_info=lambda model: self.model(model).info,
        )

    @classmethod
    def from_config(cls, path: str | Path | None = None, **kwargs: Any) -> Assembler:
        """An assembler for the config file at ``path`` (or the nearest one, or defaults)."""
        return cls(load_config(path), **kwargs)

    # -- set-up checks -------------------------------------------------------------------

    def _validate(self) -> None:
        cfg, reg = self.config, self.registry
        where = cfg.where
        for key, what, name, table in (
            ("fit.strategy", "fit strategy", cfg.fit.strategy, reg.fit_strategies),
            ("format.system", "formatter", cfg.format.system, reg.formatters),
            ("format.history", "formatter", cfg.format.history, reg.formatters),
            ("format.event", "formatter", cfg.format.event, reg.formatters),
        ):
            if name not in table:
                raise ConfigError(
                    f"unknown {what} {name!r}; known: {_names(table)}",
                    file=where,
                    key=cfg.key(key),
                )
        if cfg.fit.summarizer is not None and cfg.fit.summarizer not in reg.summarizers:
            raise ConfigError(
                f"unknown summarizer {cfg.fit.summarizer!r}; known: {_names(reg.summarizers)}",
                file=where,
                key=cfg.key("fit.summarizer"),
            )
        for section, layers in (("layers", cfg.layers), ("placement", cfg.placement)):
            for layer in layers:
                if layer not in reg.layers:
                    raise ConfigError(
                        f"unknown layer {layer!r}; known: {_names(reg.layers)}",
                        file=where,
                        key=cfg.key(f"{section}.{layer}"),
                    )
        for name, item in reg.layers.items():
            fmt = item.record.format
            if fmt is not None and fmt not in reg.formatters:
                raise PluginError(
                    f"layer {name!r} asks for unknown formatter {fmt!r}", plugin=item.plugin
                )
        for i, block in enumerate(cfg.blocks):
            if block.layer not in reg.layers:
                raise ConfigError(
                    f"unknown layer {block.layer!r}; known: {_names(reg.layers)}",
                    file=where,
                    key=cfg.key(f"blocks[{i}].layer"),
                )
            if block.truncation not in reg.truncators:
                raise ConfigError(
                    f"unknown truncation {block.truncation!r}; known: {_names(reg.truncators)}",
                    file=where,
                    key=cfg.key(f"blocks[{i}].truncation"),
                )

    # -- public API ----------------------------------------------------------------------

    def request(self, message: str, **fields: Any) -> AssemblyRequest:
        """A request for ``message`` with the config's defaults (session, model, role, …)."""
        cfg = self.config
        event_keys = {a.name for a in attrs_fields(Event)}
        event_fields = {k: fields.pop(k) for k in list(fields) if k in event_keys}
        base: dict[str, Any] = {
            "session_label": cfg.session,
            "model": cfg.model,
            "role": cfg.role,
            "provider": cfg.provider,
            "permissions": cfg.permissions,
            "workspace_path": str(cfg.resolve(cfg.workspace)),
            "event": Event(content=message, **event_fields),
        }
        base.update(fields)
        return AssemblyRequest(**base)

    def assemble(
        self,
        request: AssemblyRequest,
        *,
        strategy: str | None = None,
        minimum_recent: int | None = None,
        reserve_response: int | None = None,
    ) -> AssembledContext:
        """Assemble one turn's context (through any ``lamina_wrap_assembly`` wrappers).

        The keywords override config for this call only: ``strategy`` (e.g. ``stopAtLimit``
        to learn whether the history fits before compacting), ``minimum_recent`` (history
        groups never cut) and ``reserve_response`` (tokens kept for the reply).
        """
        for name, value in (
            ("minimum_recent", minimum_recent),
            ("reserve_response", reserve_response),
        ):
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value}")
        overrides = Overrides(
            strategy=strategy, minimum_recent=minimum_recent, reserve_response=reserve_response
        )
        if strategy is not None and strategy not in self.registry.fit_strategies:
            raise ConfigError(
                f"unknown fit strategy {strategy!r}; known: {_names(self.registry.fit_strategies)}"
            )
        call = AssemblyCall(
            request=request,
            config=self.config,
            kernel=self.kernel,
            overrides=overrides,
            engine=self,
        )
        hook = self.host.wrap_assembly
        result: AssembledContext = hook.call_extra([self._innermost], {"call": call})
        return result

    def _innermost(self, call: AssemblyCall) -> AssembledContext:
        """The pipeline, as the innermost ``lamina_wrap_assembly`` (wrappers surround it)."""
        o = call.overrides
        return self.run(
            call.request,
            strategy=o.strategy,
            minimum_recent=o.minimum_recent,
            reserve_response=o.reserve_response,
        )

    def model(self, name: str) -> ResolvedModel:
        """The model's info, tokenizer and memoizing counter, resolved once per model."""
        if name not in self._models:
            info, info_plugin = self.host.model_info(name)
            if self.config.budget.context_window is not None:
                info = evolve(info, context_window=self.config.budget.context_window)
            tok, tok_plugin = self.host.tokenizer(name, info)
            self._models[name] = ResolvedModel(
                info=info,
                info_plugin=info_plugin,
                tokenizer=tok,
                tokenizer_plugin=tok_plugin,
                counter=TokenCounter(tok),
            )
        return self._models[name]

    def adapter(self, name: str) -> Adapter:
        """The adapter named ``name`` (``ConfigError`` naming the known ones otherwise)."""
        found = self.registry.adapters.get(name)
        if found is None:
            raise ConfigError(
                f"no adapter for provider {name!r}; installed: {_names(self.registry.adapters)}",
                key="provider",
            )
        adapter: Adapter = found.record
        return adapter

    def payload(
        self, context: AssembledContext, provider: str | None = None, **options: Any
    ) -> dict[str, Any]:
        """The provider request for ``context`` (provider: argument, else the context's)."""
        return self.adapter(provider or context.provider).build_request(context, options)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> Assembler:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the pipeline --------------------------------------------------------------------

    def settings(self, plugin: str) -> Any:
        """The validated settings of ``plugin`` (``None`` when it takes or has none)."""
        return self.host.settings.get(plugin)

    def summarizer(self, name: str | None = None) -> Summarizer:
        """The summarizer named ``name`` (default: ``[fit] summarizer``)."""
        wanted = name or self.config.fit.summarizer
        found = self.registry.summarizers.get(wanted) if wanted else None
        if found is None:
            raise ConfigError(
                f"no summarizer {wanted!r}; known: {_names(self.registry.summarizers)}",
                key=self.config.key("fit.summarizer"),
            )
        summarizer: Summarizer = found.record
        return summarizer

    def run(
        self,
        request: AssemblyRequest,
        *,
        strategy: str | None = None,
        minimum_recent: int | None = None,
        reserve_response: int | None = None,
    ) -> AssembledContext:
        """The pipeline itself (what the built-in ``lamina_wrap_assembly`` calls)."""
        timings: dict[str, float] = {}
        warnings: list[str] = []
        cfg = self.config
        resolved = self.model(request.model)
        info, tok, counter = resolved.info, resolved.tokenizer, resolved.counter
        revision = getattr(tok, "revision", None)
        if revision != resolved.revision[0]:  # its counts changed: forget the memoized ones
            resolved.revision[0] = revision
            counter.clear()
        if info.assumed:
            warnings.append(
                f"model {request.model!r} is not known to any plugin; assuming a context window "
                f"of {info.context_window} tokens"
            )
        budget_cfg = (
            cfg.budget
            if reserve_response is None
            else evolve(cfg.budget, reserve_response=reserve_response)
        )
        reserve_response, reserve_tools = reserves(budget_cfg, info.context_window, info.max_output)
        try:
            budget = TokenBudget.plan(
                model_limit=info.context_window,
                reserve_response=reserve_response,
                reserve_tools=reserve_tools,
                cap=request.max_tokens or cfg.budget.max_tokens,
            )
        except ValueError as exc:
            raise ConfigError(
                f"{exc} (model {request.model!r}); lower the reserves",
                file=cfg.where,
                key=cfg.key("budget"),
            ) from exc
        now = self.clock()

        with _timed(timings, "gather", self.progress):
            exclusions: list[tuple[Exclusion, str]] = []
            gathered = self._gather(request, budget, tok, now, warnings, exclusions)
        with _timed(timings, "place", self.progress):
            items = self._place(gathered)
        with _timed(timings, "measure", self.progress):
            for item in items:
                item.tokens = item.original_tokens = self._measure(item, counter)
        tools = self._tools(request)
        tool_tokens = self._tool_tokens(info, tools, tok, counter)
        fixed = self._fixed_overhead(info, items) + tool_tokens
        fitter = Fitter(
            tokenizer=tok,
            measure=lambda it: self._measure(it, counter),
            truncators={n: a.record for n, a in self.registry.truncators.items()},
            strategy=self._strategy(strategy),
            minimum_recent=cfg.fit.minimum_recent if minimum_recent is None else minimum_recent,
            marker=lambda n: self._marker(n, counter),
            summarizer=self._summarizer(),
            caps=self._caps(budget.available),
        )
        with _timed(timings, "fit", self.progress):
            self._apply_block_caps(items, fitter, warnings)
            fitter.fit(items, budget.available, fixed)
            for layer, cap in fitter.caps.items():
                over = fitter.total([i for i in items if i.spec.name == layer]) - cap
                if over > 0:
                    warnings.append(
                        f"layer {layer!r} is {over} tokens over its cap ({cap}): what is left "
                        "is required"
                    )
        with _timed(timings, "format", self.progress):
            out, used = self._format_within(
                items, fitter, info, counter, budget.available, fixed, tool_tokens
            )
        budget = evolve(budget, used=used, remaining=budget.available - used.total)
        report = AssemblyReport(
            blocks=(
                *(_block_report(i) for i in sorted([*items, *fitter.markers], key=_order)),
                *(self._exclusion_report(x, plugin) for x, plugin in exclusions),
            ),
            layers=self._layer_reports(items, fitter),
            warnings=tuple(warnings),
            tokenizer=TokenizerReport(
                name=tok.name, plugin=resolved.tokenizer_plugin, exact=tok.exact
            ),
            stable_prefix=StablePrefix(
                tokens=used.system_prompt + used.history - self._after_tokens(info, counter, out),
                sha256=_with_tools(out.prefix_sha256, tools),
            ),
            strategy=fitter.strategy.name,
            timings_ms=timings,
        )
        return AssembledContext(
            system_prompt=out.system_prompt,
            history=out.history,
            current_message=out.current,
            tools=tools,
            model=request.model,
            provider=request.provider or info.provider or "",
            model_config=request.model_config,
            token_budget=budget,
            session_label=request.session_label,
            role=request.role,
            workspace_path=request.workspace_path,
            parent_turn_id=request.parent_turn_id,
            toolset_name=request.toolset_name,
            permissions_granted=request.permissions,
            source_event_id=request.event.id,
            system_context_json=_system_context_json(items),
            report=report,
        )

    def _format_within(
        self,
        items: list[Item],
        fitter: Fitter,
        info: ModelInfo,
        counter: TokenCounter,
        available: int,
        fixed: int,
        tool_tokens: int,
    ) -> tuple[Formatted, BudgetUsage]:
        """Format, then count the final text exactly. The exact count can exceed the piecewise
        estimate (BPE merges across joins); when that puts the text over, shrink the estimate's
        target by the observed ratio and fit again. Fitting only cuts, and each round demands
        at least one token more, so this ends."""
        extra = 0
        for _ in range(_VERIFY_ROUNDS):
            live = [i for i in items if i.live] + fitter.markers
            out = self._format(live)
            used = self._usage(info, counter, out, live, tool_tokens)
            over = used.total - available
            if over <= 0:
                return out, used
            estimate = fitter.total(items) + fitter.marker_total() + fixed
            target = available * estimate // used.total
            extra = max(extra + 1, available - target)
            fitter.fit(items, available, fixed, extra)
        raise BudgetError(
            f"the formatted context is still {over} tokens over the {available} available after "
            f"{_VERIFY_ROUNDS} rounds of cutting",
            overage=over,
            available=available,
        )

    # gather ------------------------------------------------------------------------------

    def _gather(
        self,
        request: AssemblyRequest,
        budget: TokenBudget,
        tok: Tokenizer,
        now: datetime,
        warnings: list[str],
        exclusions: list[tuple[Exclusion, str]],
    ) -> list[tuple[Block, str]]:
        providers = self.registry.providers
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=max(4, len(providers)), thread_name_prefix="lamina-provider"
            )
        futures: list[tuple[Attributed, Future[list[Block]]]] = []
        contexts: list[ProviderContext] = []
        started = time.monotonic()
        views = self._layer_views(budget.available)
        for item in providers:
            ctx = ProviderContext(
                request=request,
                config=self.config,
                settings=self.host.settings.get(item.plugin),
                budget=budget,
                tokenizer=tok,
                now=now,
                plugin=item.plugin,
                layers=views,
            )
            provider: LayerProvider = item.record
            contexts.append(ctx)
            futures.append((item, self._executor.submit(_run_provider, provider, ctx)))
        gathered: list[tuple[Block, str]] = []
        seen: dict[str, str] = {}
        for item, future in futures:
            provider = item.record
            limit = provider.timeout or self.config.plugins.timeout
            try:
                blocks = future.result(timeout=max(0.0, started + limit - time.monotonic()))
            except FutureTimeout:
                future.cancel()
                self._provider_failed(item, f"timed out after {limit:g}s", None, warnings)
                continue
            except Exception as exc:
                if isinstance(exc, LaminaError) and provider.required:
                    raise
                self._provider_failed(item, f"raised {type(exc).__name__}: {exc}", exc, warnings)
                continue
            problem = self._check_blocks(provider, blocks, seen)
            if problem is not None:
                self._provider_failed(item, problem, None, warnings)
                continue
            for block in blocks:
                seen[block.id] = item.plugin
                gathered.append((block, item.plugin))
        for ctx in contexts:  # in provider order, whatever order they finished in
            warnings.extend(ctx.warnings)
            exclusions.extend((x, ctx.plugin) for x in ctx.exclusions)
        if self.registry.block_transforms:
            gathered = self._transform(gathered, contexts[0] if contexts else None, warnings)
        return gathered

    def _transform(
        self,
        gathered: list[tuple[Block, str]],
        base: ProviderContext | None,
        warnings: list[str],
    ) -> list[tuple[Block, str]]:
        """Run every block transform over every block (a changed block gets a fresh hash)."""
        if base is None:
            return gathered
        out = gathered
        for item in self.registry.block_transforms:
            record: BlockTransform = item.record
            ctx = evolve(
                base,
                settings=self.host.settings.get(item.plugin),
                plugin=item.plugin,
                warnings=[],
                exclusions=[],
            )
            done = []
            for block, plugin in out:
                try:
                    changed = record.transform(block, ctx)
                except Exception as exc:
                    raise PluginError(
                        f"block transform {record.name!r} raised {type(exc).__name__} on block "
                        f"{block.id!r}: {exc}",
                        plugin=item.plugin,
                    ) from exc
                if not isinstance(changed, Block) or changed.id != block.id:
                    raise PluginError(
                        f"block transform {record.name!r} must return the block it was given "
                        f"(same id), got {changed!r:.80}",
                        plugin=item.plugin,
                    )
                if changed is not block and changed.content != block.content:
                    changed = evolve(changed, hash=content_hash(changed.content), token_count=None)
                done.append((changed, plugin))
            out = done
            warnings.extend(ctx.warnings)
        return out

    def _check_blocks(
        self, provider: LayerProvider, blocks: list[Block], seen: dict[str, str]
    ) -> str | None:
        """What is wrong with a provider's blocks, if anything (the first problem found)."""
        ids: set[str] = set()
        for block in blocks:
            if not isinstance(block, Block):
                return f"yielded {type(block).__name__}, expected Block"
            if block.layer not in self.registry.layers:
                return (
                    f"yielded block {block.id!r} for unknown layer {block.layer!r}; "
                    f"known: {_names(self.registry.layers)}"
                )
            if provider.layers and block.layer not in provider.layers:
                return (
                    f"yielded block {block.id!r} for layer {block.layer!r}, but declares only "
                    f"{', '.join(provider.layers)}"
                )
            if block.truncation not in self.registry.truncators:
                return f"yielded block {block.id!r} with unknown truncation {block.truncation!r}"
            if block.id in seen or block.id in ids:
                first = seen.get(block.id, "this provider")
                return f"yielded block id {block.id!r} twice (first from {first!r})"
            ids.add(block.id)
        return None

    def _provider_failed(
        self, item: Attributed, what: str, exc: BaseException | None, warnings: list[str]
    ) -> None:
        provider: LayerProvider = item.record
        message = f"layer provider {provider.name!r} {what}"
        if provider.required:
            raise ProviderError(message, plugin=item.plugin) from exc
        warnings.append(f"plugin {item.plugin!r}: {message}; its blocks were left out")

    # place -------------------------------------------------------------------------------

    def _place(self, gathered: list[tuple[Block, str]]) -> list[Item]:
        cfg = self.config
        items = []
        for index, (block, plugin) in enumerate(gathered):
            spec = self.registry.layer(block.layer)
            layer_cfg = cfg.layers.get(block.layer)
            placement: Placement = (
                cfg.placement.get(block.layer)
                or (layer_cfg.placement if layer_cfg else None)
                or spec.placement
            )
            required = block.required
            if required is None:
                required = (
                    layer_cfg.required
                    if layer_cfg and layer_cfg.required is not None
                    else spec.required
                )
            items.append(
                Item(
                    block=block,
                    spec=spec,
                    placement=placement,
                    required=required,
                    index=index,
                    plugin=plugin,
                )
            )
        items.sort(key=lambda i: (i.spec.order, i.index))
        for n, item in enumerate(items):
            item.index = n
        return items

    # measure -----------------------------------------------------------------------------

    def _formatter(self, item: Item) -> Formatter:
        return self._formatter_for(item.spec, item.placement)

    def _formatter_for(self, spec: LayerSpec, placement: Placement) -> Formatter:
        cfg = self.config.format
        if placement == "history":
            name = cfg.history
        else:
            name = (
                spec.format
                or {
                    "system": cfg.system,
                    "before_history": cfg.history,
                    "after_history": cfg.history,
                    "event": cfg.event,
                }[placement]
            )
        fmt: Formatter = self.registry.formatters[name].record
        return fmt

    def _render(self, item: Item) -> str:
        block = item.block
        fmt = self._formatter(item)
        key = (
            fmt.name,
            block.hash,
            block.title,
            block.tag,
            block.provenance.path,
            block.trusted,
            block.id,
        )
        text = self._render_cache.get(key)
        if text is None:
            text = self._render_cache.setdefault(key, fmt.render(block))
        return text

    def _measure(self, item: Item, counter: TokenCounter) -> int:
        block = item.block
        if block.token_count is not None and block.counted_by == counter.tokenizer.name:
            return block.token_count
        if item.placement == "history":
            return counter.remember(
                "parts:" + block.hash, lambda: _parts_tokens(block.content, counter)
            )
        text_tokens = counter.count(self._render(item)) if block.body else 0
        extra = sum(IMAGE_TOKENS for p in block.content if isinstance(p, ImagePart))
        sep = counter.count(self._formatter(item).separator)
        return text_tokens + extra + sep

    def _fixed_overhead(self, info: ModelInfo, items: Sequence[Item]) -> int:
        history = sum(1 for i in items if i.placement == "history")
        framing = 3 + history  # system message, before/after-history messages, current message
        return info.message_overhead * framing + info.reply_overhead

    def _marker(self, count: int, counter: TokenCounter) -> Item:
        text = self.config.fit.marker.format(count=count)
        block = Block.text(
            f"history:gap:{count}",
            "session",
            text,
            role="user",
            trusted=True,
            provenance=Provenance(plugin="core"),
        )
        spec = self.registry.layer("session")
        item = Item(
            block=block,
            spec=spec,
            placement="history",
            required=True,
            index=0,
            plugin="core",
            synthetic=True,
            reason="marks removed history",
        )
        item.tokens = item.original_tokens = _parts_tokens(block.content, counter)
        return item

    def _strategy(self, name: str | None = None) -> FitStrategy:
        chosen = name or self.config.fit.strategy
        strategy: FitStrategy = self.registry.fit_strategies[chosen].record
        return strategy

    def _summarizer(self) -> Summarizer | None:
        name = self.config.fit.summarizer
        if name is None:
            return None
        summarizer: Summarizer = self.registry.summarizers[name].record
        return summarizer

    def _layer_views(self, available: int) -> dict[str, LayerView]:
        """Each layer's effective placement, formatter and cap, as providers see them."""
        caps = self._caps(available)
        views = {}
        for name, attributed in self.registry.layers.items():
            spec: LayerSpec = attributed.record
            layer_cfg = self.config.layers.get(name)
            placement: Placement = (
                self.config.placement.get(name)
                or (layer_cfg.placement if layer_cfg else None)
                or spec.placement
            )
            views[name] = LayerView(
                name=name,
                placement=placement,
                formatter=self._formatter_for(spec, placement),
                cap=caps.get(name),
            )
        return views

    def _caps(self, available: int) -> dict[str, int]:
        caps = {}
        for name, layer in self.config.layers.items():
            limits = [
                x
                for x in (
                    layer.max_tokens,
                    None if layer.share is None else int(layer.share * available),
                )
                if x is not None
            ]
            if limits:
                caps[name] = min(limits)
        return caps

    def _apply_block_caps(self, items: Sequence[Item], fitter: Fitter, warnings: list[str]) -> None:
        """Shrink blocks over their own ``max_tokens``; a required block is truncated if its
        strategy allows, never dropped."""
        for item in items:
            cap = item.block.max_tokens
            if cap is None or item.tokens <= cap:
                continue
            if item.required:
                if not fitter.truncate_to(item, cap):
                    warnings.append(
                        f"required block {item.block.id!r} has {item.tokens} tokens, over its "
                        f"max_tokens ({cap}), and cannot be truncated: kept whole"
                    )
                continue
            fitter.shrink_block(item, item.tokens - cap)
            if not item.live:
                item.reason = f"larger than its max_tokens ({cap})"

    # format ------------------------------------------------------------------------------

    def _format(self, live: list[Item]) -> Formatted:
        by_place: dict[str, list[Item]] = {}
        for item in sorted(live, key=_order):
            by_place.setdefault(item.placement, []).append(item)
        system = self._join(by_place.get("system", []))
        history: list[Message] = []
        wrappers: list[str] = []
        before = self._join(by_place.get("before_history", []))
        if before:
            history.append(Message.of("user", before))
            wrappers.append(before)
        for item in by_place.get("history", []):
            block = item.block
            history.append(
                Message(
                    role=block.role or "user",
                    content=block.content,
                    context_json=block.provenance.metadata.get("context_json"),
                )
            )
        after = self._join(by_place.get("after_history", []))
        if after:
            history.append(Message.of("user", after))
            wrappers.append(after)
        event_items = by_place.get("event", [])
        extra: list[Part] = [
            p
            for i in event_items
            for p in i.block.content
            if not isinstance(p, TextPart | ToolResultPart)
        ]
        current = Message(role="user", content=(TextPart(text=self._join(event_items)), *extra))
        # The stable prefix: system + history up to the current message, less the dynamic
        # after-history wrapper.
        prefix = hashlib.sha256(system.encode("utf-8", "surrogatepass"))
        if before:
            prefix.update(b"\x00" + before.encode("utf-8", "surrogatepass"))
        for item in by_place.get("history", []):
            prefix.update(f"\x00{item.block.role}\x00{item.block.hash}".encode())
        return Formatted(
            system_prompt=system,
            history=tuple(history),
            current=current,
            wrappers=tuple(wrappers),
            after_history=after,
            prefix_sha256=prefix.hexdigest(),
        )

    def _join(self, items: list[Item]) -> str:
        if not items:
            return ""
        parts = [self._render(i) for i in items if i.block.body]
        separator = self._formatter(items[0]).separator
        return separator.join(parts)

    def _usage(
        self,
        info: ModelInfo,
        counter: TokenCounter,
        out: Formatted,
        live: Sequence[Item],
        tool_tokens: int,
    ) -> BudgetUsage:
        """Exact usage of the final text. History messages are the blocks' own parts, so their
        memoized counts are reused; the before/after-history wrappers are counted afresh. Tool
        definitions count with the system prompt: both are the static head of a request."""
        overhead = info.message_overhead
        system = counter.count(out.system_prompt) + overhead if out.system_prompt else 0
        system += tool_tokens
        hist = sum(i.tokens for i in live if i.placement == "history")
        hist += sum(counter.count(w) for w in out.wrappers) + overhead * len(out.history)
        event = _parts_tokens(out.current.content, counter) + overhead + info.reply_overhead
        return BudgetUsage(
            system_prompt=system, history=hist, event=event, total=system + hist + event
        )

    def _after_tokens(self, info: ModelInfo, counter: TokenCounter, out: Formatted) -> int:
        if not out.after_history:
            return 0
        return counter.count(out.after_history) + info.message_overhead

    # tools and report ---------------------------------------------------------------------

    def _tool_tokens(
        self, info: ModelInfo, tools: Sequence[Tool], tok: Tokenizer, counter: TokenCounter
    ) -> int:
        """What the tool definitions cost: the provider's own count when the model info has
        one, else each tool's JSON (name, description, input schema)."""
        if not tools:
            return 0
        if info.tool_tokens is not None:
            return info.tool_tokens(tools, tok)
        return sum(
            counter.count(
                json.dumps(
                    {"name": t.name, "description": t.description, "input_schema": t.input_schema},
                    sort_keys=True,
                    ensure_ascii=False,
                )
            )
            for t in tools
        )

    def _tools(self, request: AssemblyRequest) -> tuple[Tool, ...]:
        offered: dict[str, Tool] = {t.name: t for t in self.config.tools}
        offered.update({t.name: t for t in request.tools})
        filters = [a.record for a in self.registry.tool_filters]
        return tuple(t for t in offered.values() if all(f.allows(t, request) for f in filters))

    def _exclusion_report(self, x: Exclusion, plugin: str) -> BlockReport:
        spec = self.registry.layers.get(x.layer)
        placement = (
            "" if spec is None else self.config.placement.get(x.layer) or spec.record.placement
        )
        return BlockReport(
            id=x.id,
            layer=x.layer,
            placement=placement,
            plugin=plugin,
            status="dropped",
            tokens=0,
            original_tokens=0,
            path=x.path,
            reason=x.reason,
        )

    def _layer_reports(self, items: Sequence[Item], fitter: Fitter) -> tuple[LayerReport, ...]:
        out = []
        names = sorted({i.spec.name for i in items}, key=lambda n: self.registry.layer(n).order)
        for name in names:
            members = [i for i in items if i.spec.name == name]
            out.append(
                LayerReport(
                    layer=name,
                    placement=members[0].placement,
                    blocks=len(members),
                    kept=sum(1 for i in members if i.live),
                    tokens=sum(i.tokens for i in members),
                    original_tokens=sum(i.original_tokens for i in members),
                    cap=fitter.caps.get(name),
                )
            )
        return tuple(out)


# -- helpers -------------------------------------------------------------------------------


def _with_tools(prefix_sha256: str, tools: Sequence[Tool]) -> str:
    """The stable prefix's hash, covering the tool definitions sent with it (if any)."""
    if not tools:
        return prefix_sha256
    definitions = json.dumps([unstructure(t) for t in tools], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f"{definitions}\x00{prefix_sha256}".encode()).hexdigest()


def _run_provider(provider: LayerProvider, ctx: ProviderContext) -> list[Block]:
    return list(provider.provide(ctx))


def _order(item: Item) -> tuple[int, int]:
    return (item.index, 0 if item.synthetic else 1)


def _names(table: dict[str, Any]) -> str:
    return ", ".join(sorted(table)) or "none"


def _parts_tokens(parts: Sequence[Part], counter: TokenCounter) -> int:
    return count_parts(parts, counter.count)


def _block_report(item: Item) -> BlockReport:
    status, reason = item.status, item.reason
    pre = item.block.pre_truncated
    if pre is not None and status != "dropped":
        reason = f"{pre}; {reason}" if reason else pre
        if status == "kept":
            status = "truncated"
    return BlockReport(
        id=item.block.id,
        layer=item.spec.name,
        placement=item.placement,
        plugin=item.plugin,
        status=status,
        tokens=item.tokens,
        original_tokens=item.original_tokens,
        path=item.block.provenance.path,
        strategy=item.strategy,
        reason=reason,
        hash=item.block.hash,
        source_id=item.block.provenance.source_id,
        details={k: v for k, v in item.block.provenance.metadata.items() if k != "context_json"},
    )


def _system_context_json(items: Sequence[Item]) -> dict[str, Any]:
    """The system blocks' ``context_json`` provenance, deep-merged in order (what was kept)."""
    merged: dict[str, Any] = {}
    for item in sorted(items, key=_order):
        if item.placement == "system" and item.live:
            found = item.block.provenance.metadata.get("context_json")
            if isinstance(found, dict):
                _deep_merge(merged, found)
    return merged


def _deep_merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value


class _timed:
    """Records a phase's wall time in milliseconds (and tells the progress callback)."""

    def __init__(self, timings: dict[str, float], phase: str, progress: Progress | None) -> None:
        self.timings, self.phase, self.progress = timings, phase, progress

    def __enter__(self) -> None:
        if self.progress is not None:
            self.progress(self.phase)
        self.started = time.perf_counter()

    def __exit__(self, *_: object) -> None:
        self.timings[self.phase] = round(1000 * (time.perf_counter() - self.started), 3)

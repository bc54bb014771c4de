"""The assembler: the public entry point, which runs one phase module after another.

``Assembler`` resolves its plugins once; ``run`` is then plain calls on resolved objects, in
the order plan → gather → place → measure → fit → format → report, each timed in the report;
a stream whose history only grew since a call that kept everything whole goes from gather to
its context at once (``grown``). Token counts and renderings are memoized by content, so
re-assembling an unchanged prefix re-tokenizes nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attrs import evolve
from attrs import fields as attrs_fields

from lamina.assembly.fit import Fitter, fit
from lamina.assembly.format import after_history_tokens, format_within
from lamina.assembly.gather import Gatherer
from lamina.assembly.grown import grown, kept_whole
from lamina.assembly.layout import Layout, LayoutCache
from lamina.assembly.measure import Measurer, measure
from lamina.assembly.place import place
from lamina.assembly.plan import plan
from lamina.assembly.report import report
from lamina.assembly.rules import Rules
from lamina.assembly.state import InFlight, Progress, ResolvedModel, milliseconds
from lamina.assembly.tool_results import edit_tool_results
from lamina.call import AssemblyCall, KernelView, Overrides
from lamina.config import LaminaConfig, load_config
from lamina.errors import BudgetError, ConfigError, PluginError
from lamina.log import get_logger
from lamina.model.blocks import Block
from lamina.model.context import AssembledContext
from lamina.model.request import AssemblyRequest, Event
from lamina.plugins import PluginHost, Registry
from lamina.records import Adapter, FitStrategy, Summarizer
from lamina.tokens import TokenCounter

_log = get_logger("assembly")
_NONE = Overrides()  # (frozen: one for every call that overrides nothing)


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
        self._validate()
        self.rules = Rules(config=self.config, registry=self.registry)
        self.kernel = KernelView(
            settings=self.host.settings,
            strategies={n: a.record for n, a in self.registry.fit_strategies.items()},
            model_info=lambda model: self.model(model).info,
        )
        self._models: dict[str, ResolvedModel] = {}
        self._models_lock = threading.Lock()
        self._render_cache: dict[tuple[Any, ...], str] = {}
        self._layouts = LayoutCache()
        self._gaps: dict[int, Block] = {}
        self._gatherer = Gatherer(self.config, self.registry, self.host.settings)
        self._truncators = {n: a.record for n, a in self.registry.truncators.items()}

    @classmethod
    def from_config(cls, path: str | Path | None = None, **kwargs: Any) -> Assembler:
        """An assembler for the config file at ``path`` (or the nearest one, or defaults)."""
        return cls(load_config(path), **kwargs)

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
        verbose_report: bool | None = None,
    ) -> AssembledContext:
        """Assemble one turn's context (through any ``lamina_wrap_assembly`` wrappers).

        The keywords override config for this call only: ``strategy`` (e.g. ``stopAtLimit``
        to learn whether the history fits before compacting), ``minimum_recent`` (history
        groups never cut), ``reserve_response`` (tokens kept for the reply) and
        ``verbose_report`` (list each dropped block in ``report.blocks``, ``[report] verbose``).
        """
        for name, value in (
            ("minimum_recent", minimum_recent),
            ("reserve_response", reserve_response),
        ):
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0, got {value}")
        if strategy is not None and strategy not in self.registry.fit_strategies:
            raise ConfigError(
                f"unknown fit strategy {strategy!r}; known: {_names(self.registry.fit_strategies)}"
            )
        if (strategy, minimum_recent, reserve_response, verbose_report) == (None, None, None, None):
            overrides = _NONE
        else:
            overrides = Overrides(
                strategy=strategy,
                minimum_recent=minimum_recent,
                reserve_response=reserve_response,
                verbose_report=verbose_report,
            )
        # The pipeline is the innermost implementation; plugins' wrappers surround it (with
        # none and no monitor, it is called directly: pluggy would build an implementation
        # for it on each call).
        hook = self.host.wrap_assembly
        if not hook.get_hookimpls() and not self.host.pm.monitored:
            return self.run(request, overrides)
        call = AssemblyCall(
            request=request,
            config=self.config,
            kernel=self.kernel,
            overrides=overrides,
            engine=self,
        )
        result: AssembledContext = hook.call_extra([self._innermost], {"call": call})
        return result

    async def aassemble(
        self,
        request: AssemblyRequest,
        *,
        strategy: str | None = None,
        minimum_recent: int | None = None,
        reserve_response: int | None = None,
        verbose_report: bool | None = None,
    ) -> AssembledContext:
        """``assemble`` for asyncio hosts: it runs on a worker thread, so the event loop never
        waits on tokenizing or on providers' I/O. An assembler is safe to share between
        threads and tasks: resolved plugins are read-only and memoized counts are locked."""
        import asyncio

        return await asyncio.to_thread(
            self.assemble,
            request,
            strategy=strategy,
            minimum_recent=minimum_recent,
            reserve_response=reserve_response,
            verbose_report=verbose_report,
        )

    def model(self, name: str) -> ResolvedModel:
        """The model's info, tokenizer and memoizing counter, resolved once per model."""
        found = self._models.get(name)
        if found is not None:
            return found
        with self._models_lock:
            return self._resolve_model(name)

    def _resolve_model(self, name: str) -> ResolvedModel:
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
                counter=TokenCounter(tok, plugin=tok_plugin),
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

    def close(self) -> None:
        """Stop the provider pool (assembling again starts a new one)."""
        self._gatherer.close()

    def __enter__(self) -> Assembler:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the pipeline --------------------------------------------------------------------

    def run(self, request: AssemblyRequest, overrides: Overrides | None = None) -> AssembledContext:
        """The pipeline itself, phase by phase (what ``assemble`` runs inside the wrappers); a
        budget that cannot be met is logged (``lamina.assembly``, info) and raised."""
        try:
            return self._run(request, overrides or _NONE)
        except BudgetError as exc:
            _log.info("assembly refused: %s", exc)
            raise

    def _run(self, request: AssemblyRequest, overrides: Overrides) -> AssembledContext:
        progress = self.progress
        if progress is not None:
            progress("plan")
        started = time.perf_counter()
        model = self.model(request.model)
        state = plan(request, overrides, model, self.config, self.registry, self.clock())
        state.verbose = (
            self.config.report.verbose
            if overrides.verbose_report is None
            else overrides.verbose_report
        )
        state.timings["plan"] = milliseconds(time.perf_counter() - started)
        measurer = Measurer(
            self.rules,
            model.counter,
            self._render_cache,
            model.info.message_overhead,
            self._gaps,
        )
        key = (request.session_label, request.model)
        layout = self._layouts.take(key, model.revision[0])
        whole, layout.whole = layout.whole, None
        try:
            with state.phase("gather", progress):
                self._gatherer.gather(state, self.rules, layout)
            if whole is not None and layout.cut is None:
                started = time.perf_counter()
                found = grown(state, whole, measurer, self.rules)
                if found is not None:
                    state.timings["grown"] = milliseconds(time.perf_counter() - started)
                    context, layout.whole = found
                    return context
            return self._fitted(state, measurer, layout)
        finally:
            self._layouts.give(key, layout)

    def _fitted(self, state: InFlight, measurer: Measurer, layout: Layout) -> AssembledContext:
        """The pipeline after gather: place, measure, fit, format and report."""
        progress = self.progress
        fitter = self._fitter(state.overrides, measurer, state.budget.available, state.warnings)
        previous, layout.cut = layout.cut, None
        try:
            with state.phase("place", progress):
                place(state, self.rules, layout)
            with state.phase("measure", progress):
                measure(state, measurer)
            with state.phase("fit", progress):
                fitter.begin(state, previous)
                previous = None
                edit_tool_results(state, measurer, fitter, self.config.tool_results)
                fit(state, fitter)
            with state.phase("format", progress):
                format_within(state, measurer, fitter)
            with state.phase("report", progress):
                state.cuts = fitter.cuts
                context = report(state, self.rules, after_history_tokens(state, measurer))
            layout.whole = kept_whole(state, context, fitter, layout, self.rules, self.config)
        finally:
            # Items go back as gathered and measured, but for this call's cut of pristine
            # history: its items stay dropped for the next call to take or put back.
            fitter.resolve()
            for item in fitter.touched:
                item.reset()
            layout.cut = fitter.cut if previous is None else previous
        # The report holds ``state.timings`` itself, which now has the report phase's too.
        return context

    def _innermost(self, call: AssemblyCall) -> AssembledContext:
        """The pipeline as the innermost ``lamina_wrap_assembly``."""
        return self.run(call.request, call.overrides)

    def _fitter(
        self, overrides: Overrides, measurer: Measurer, available: int, warnings: list[str]
    ) -> Fitter:
        cfg = self.config
        strategy: FitStrategy = self.registry.fit_strategies[
            overrides.strategy or cfg.fit.strategy
        ].record
        summarizer = self.summarizer() if cfg.fit.summarizer is not None else None
        minimum = cfg.fit.minimum_recent
        return Fitter(
            tokenizer=measurer.counter,
            measurer=measurer,
            truncators=self._truncators,
            strategy=strategy,
            minimum_recent=minimum
            if overrides.minimum_recent is None
            else overrides.minimum_recent,
            summarizer=summarizer,
            caps=self.rules.caps(available),
            warnings=warnings,
        )

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


def _names(table: dict[str, Any]) -> str:
    return ", ".join(sorted(table)) or "none"

"""Gather: every layer provider yields its blocks for the request, concurrently, within its
time limit; a failing optional provider is left out with a warning; block transforms run on
what was gathered."""

from __future__ import annotations

import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Any

from attrs import evolve

from lamina.assembly.pool import ProviderPool
from lamina.assembly.rules import Rules
from lamina.assembly.state import InFlight
from lamina.builtins.history_plugin import NAME as REQUEST_HISTORY
from lamina.config import LaminaConfig
from lamina.errors import LaminaError, PluginError, ProviderError
from lamina.log import get_logger
from lamina.model.blocks import SESSION, Block, content_hash
from lamina.plugins import Attributed, Registry
from lamina.records import BlockTransform, LayerProvider, ProviderContext
from lamina.wording import counted

_log = get_logger("assembly")


class Gatherer:
    """Runs the layer providers of one assembler on a pool it owns (see ``ProviderPool``)."""

    def __init__(self, config: LaminaConfig, registry: Registry, settings: dict[str, Any]):
        self.config = config
        self.registry = registry
        self.settings = settings
        self._pool = ProviderPool()

    def close(self) -> None:
        self._pool.close()

    def gather(self, state: InFlight, rules: Rules) -> None:
        """The gather phase: ``state.gathered`` holds each block with its plugin, in provider
        order; warnings and exclusions go to the state in the same order."""
        providers = self.registry.providers
        views = rules.views(state.budget.available)
        futures: list[tuple[Attributed, Future[Any]]] = []
        contexts: list[ProviderContext] = []
        started = time.monotonic()
        for item in providers:
            ctx = ProviderContext(
                request=state.request,
                config=self.config,
                settings=self.settings.get(item.plugin),
                budget=state.budget,
                tokenizer=state.model.tokenizer,
                now=state.now,
                plugin=item.plugin,
                layers=views,
            )
            contexts.append(ctx)
            key = f"{item.plugin}:{item.record.name}"
            if self._pool.stuck(key) >= self._pool.max_stuck:
                what = f"is still running {self._pool.stuck(key)} calls past their time limit"
                _failed(item, what, None, state.warnings)
                continue
            futures.append((item, self._pool.submit(partial(_run_provider, item.record, ctx))))
        seen: dict[str, str] = {}
        for item, future in futures:
            provider: LayerProvider = item.record
            limit = provider.timeout or self.config.plugins.timeout
            try:
                blocks = future.result(timeout=max(0.0, started + limit - time.monotonic()))
            except FutureTimeout:
                if not future.cancel():
                    self._pool.overdue(f"{item.plugin}:{provider.name}", future)
                _failed(item, f"timed out after {limit:g}s", None, state.warnings)
                continue
            except Exception as exc:
                if isinstance(exc, LaminaError) and provider.required:
                    raise
                _failed(item, f"raised {type(exc).__name__}: {exc}", exc, state.warnings)
                continue
            problem = self._check(provider, blocks, seen)
            if problem is not None:
                _failed(item, problem, None, state.warnings)
                continue
            for block in blocks:
                seen[block.id] = item.plugin
                state.gathered.append((block, item.plugin))
        for ctx in contexts:  # in provider order, whatever order they finished in
            state.warnings.extend(ctx.warnings)
            state.exclusions.extend((x, ctx.plugin) for x in ctx.exclusions)
        choose_history(state, self.config.history.prefer)
        if self.registry.block_transforms and contexts:
            state.gathered = self._transform(state.gathered, contexts[0], state.warnings)

    def _transform(
        self, gathered: list[tuple[Block, str]], base: ProviderContext, warnings: list[str]
    ) -> list[tuple[Block, str]]:
        """Run every block transform over every block (a changed block gets a fresh hash)."""
        out = gathered
        for item in self.registry.block_transforms:
            record: BlockTransform = item.record
            ctx = evolve(
                base,
                settings=self.settings.get(item.plugin),
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

    def _check(
        self, provider: LayerProvider, blocks: list[Block], seen: dict[str, str]
    ) -> str | None:
        """What is wrong with a provider's blocks, if anything (the first problem found)."""
        ids: set[str] = set()
        for block in blocks:
            if not isinstance(block, Block):
                return f"yielded {type(block).__name__}, expected Block"
            if block.layer not in self.registry.layers:
                known = ", ".join(sorted(self.registry.layers))
                return (
                    f"yielded block {block.id!r} for unknown layer {block.layer!r}; known: {known}"
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


def choose_history(state: InFlight, prefer: str) -> None:
    """One source of history: the request's own (``history`` plugin) or the plugins' (the
    ledger), by ``[history] prefer`` when both supplied some; recorded for the report."""
    sources = {plugin for block, plugin in state.gathered if block.layer == SESSION}
    others = sorted(sources - {REQUEST_HISTORY})
    if REQUEST_HISTORY in sources and others:
        drop = set(others) if prefer == "request" else {REQUEST_HISTORY}
        left = [b for b, p in state.gathered if b.layer == SESSION and p in drop]
        state.gathered = [
            (b, p) for b, p in state.gathered if not (b.layer == SESSION and p in drop)
        ]
        used = "the request's" if prefer == "request" else f"{', '.join(others)}'s"
        state.warnings.append(
            f"history: {counted(len(left), 'block')} from {', '.join(sorted(drop))} left out; "
            f"{used} history is used ([history] prefer = {prefer!r})"
        )
        sources -= drop
    if sources == {REQUEST_HISTORY}:
        state.history_source = "request"
    elif sources:
        state.history_source = ", ".join(sorted(sources))


def _run_provider(provider: LayerProvider, ctx: ProviderContext) -> list[Block]:
    return list(provider.provide(ctx))


def _failed(item: Attributed, what: str, exc: BaseException | None, warnings: list[str]) -> None:
    provider: LayerProvider = item.record
    message = f"layer provider {provider.name!r} {what}"
    if provider.required:
        _log.info("plugin %r: %s; the assembly fails", item.plugin, message, exc_info=exc)
        raise ProviderError(message, plugin=item.plugin) from exc
    _log.warning("plugin %r: %s; its blocks were left out", item.plugin, message, exc_info=exc)
    warnings.append(f"plugin {item.plugin!r}: {message}; its blocks were left out")

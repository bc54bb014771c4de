"""Gather: every layer provider yields its blocks for the request, concurrently, within its
time limit; a failing optional provider is left out with a warning; block transforms run on
what was gathered."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from types import MappingProxyType
from typing import Any

from attrs import evolve

from lamina.assembly.layout import Checked, Layout
from lamina.assembly.pool import ProviderPool
from lamina.assembly.rules import Rules
from lamina.assembly.state import Gathered, InFlight
from lamina.builtins.history_plugin import NAME as REQUEST_HISTORY
from lamina.config import LaminaConfig
from lamina.errors import LaminaError, PluginError, ProviderError
from lamina.log import get_logger
from lamina.model.blocks import SESSION, Block, content_hash
from lamina.model.chunked import Chunked
from lamina.plugins import Attributed, Registry
from lamina.records import BlockTransform, LayerProvider, LayerView, ProviderContext
from lamina.wording import counted

_log = get_logger("assembly")


class Gatherer:
    """Runs the layer providers of one assembler on a pool it owns (see ``ProviderPool``)."""

    def __init__(self, config: LaminaConfig, registry: Registry, settings: dict[str, Any]):
        self.config = config
        self.registry = registry
        self.settings = settings
        self._pool = ProviderPool()
        #: The layers as providers see them, by available tokens (the only thing they vary by).
        self._views: dict[int, Mapping[str, LayerView]] = {}

    def close(self) -> None:
        self._pool.close()

    def gather(self, state: InFlight, rules: Rules, layout: Layout) -> None:
        """The gather phase: ``state.gathered`` holds each provider's blocks, in provider
        order; warnings and exclusions go to the state in the same order. A provider's blocks
        checked last time (``layout.checked``) are not checked again."""
        providers = self.registry.providers
        views = self._views.get(state.budget.available)
        if views is None:
            if len(self._views) >= 64:
                self._views.clear()
            fresh = MappingProxyType(rules.views(state.budget.available))  # shared: read-only
            views = self._views[state.budget.available] = fresh
        started = time.monotonic()
        contexts = [
            ProviderContext(
                request=state.request,
                config=self.config,
                settings=self.settings.get(item.plugin),
                budget=state.budget,
                tokenizer=state.model.counter,  # counts memoized by content
                now=state.now,
                plugin=item.plugin,
                layers=views,
            )
            for item in providers
        ]
        done: dict[int, Any] = {}  # the inline ones and those answered from memory
        for position, item in enumerate(providers):
            if item.record.from_memory is not None:
                found: Sequence[Block] | Exception | None
                try:
                    found = _from_memory(item.record, contexts[position])
                except Exception as exc:  # handled below, as a pooled provider's would be
                    found = exc
                if found is not None:
                    done[position] = found
        futures: dict[int, Future[Any]] = {}
        for position, item in enumerate(providers):
            key = f"{item.plugin}:{item.record.name}"
            if item.record.inline or position in done:
                continue
            if self._pool.stuck(key) >= self._pool.max_stuck:
                what = f"is still running {self._pool.stuck(key)} calls past their time limit"
                _failed(item, what, None, state.warnings)
                continue
            futures[position] = self._pool.submit(
                partial(_run_provider, item.record, contexts[position])
            )
        for position, item in enumerate(providers):  # run while the pool runs the rest
            if item.record.inline and position not in done:
                try:
                    done[position] = _run_provider(item.record, contexts[position])
                except Exception as exc:  # handled below, as a pooled provider's would be
                    done[position] = exc
        seen: list[tuple[str, set[str]]] = []
        checked: dict[int, Checked] = {}
        memos, layout.checked = layout.checked, {}  # an assembly that fails keeps none
        for position, item in enumerate(providers):
            provider: LayerProvider = item.record
            limit = provider.timeout or self.config.plugins.timeout
            try:
                if position in done:
                    blocks = done[position]
                    if isinstance(blocks, Exception):
                        raise blocks
                elif position in futures:
                    future = futures[position]
                    blocks = future.result(timeout=max(0.0, started + limit - time.monotonic()))
                else:
                    continue  # refused: too many of its calls are still running
            except FutureTimeout:
                if not future.cancel():
                    self._pool.overdue(f"{item.plugin}:{provider.name}", future)
                _failed(item, f"timed out after {limit:g}s", None, state.warnings)
                continue
            except Exception as exc:
                if isinstance(exc, LaminaError) and provider.required:
                    if exc.plugin is None:  # the error says whose it is
                        exc.plugin = item.plugin
                    raise
                _failed(item, f"raised {type(exc).__name__}: {exc}", exc, state.warnings)
                continue
            memo = self._check(provider, blocks, seen, memos.get(position))
            if isinstance(memo, str):
                _failed(item, memo, None, state.warnings)
                continue
            checked[position] = memo
            seen.append((item.plugin, memo.ids))
            state.gathered.append(
                Gathered(
                    key=position,
                    plugin=item.plugin,
                    blocks=memo.blocks,  # gather's copy: the provider's list may change
                    own=True,
                    prior=memo.prior,
                )
            )
        layout.checked = checked
        for ctx in contexts:  # in provider order, whatever order they finished in
            state.warnings.extend(ctx.warnings)
            state.exclusions.extend((x, ctx.plugin) for x in ctx.exclusions)
        choose_history(state, self.config.history.prefer, checked)
        if self.registry.block_transforms and contexts:
            self._transform(state.gathered, contexts[0], state.warnings)

    def _transform(
        self, gathered: list[Gathered], base: ProviderContext, warnings: list[str]
    ) -> None:
        """Run every block transform over every block (a changed block gets a fresh hash)."""
        for item in self.registry.block_transforms:
            record: BlockTransform = item.record
            ctx = evolve(
                base,
                settings=self.settings.get(item.plugin),
                plugin=item.plugin,
                warnings=[],
                exclusions=[],
            )
            for run in gathered:
                done = []
                for block in run.blocks:
                    try:
                        changed = record.transform(block, ctx)
                    except Exception as exc:
                        raise PluginError(
                            f"block transform {record.name!r} raised {type(exc).__name__} on "
                            f"block {block.id!r}: {exc}",
                            plugin=item.plugin,
                        ) from exc
                    if not isinstance(changed, Block) or changed.id != block.id:
                        raise PluginError(
                            f"block transform {record.name!r} must return the block it was "
                            f"given (same id), got {changed!r:.80}",
                            plugin=item.plugin,
                        )
                    if changed is not block and changed.content != block.content:
                        changed = evolve(
                            changed, hash=content_hash(changed.content), token_count=None
                        )
                    done.append(changed)
                run.replace(done)
            warnings.extend(ctx.warnings)

    def _check(
        self,
        provider: LayerProvider,
        blocks: Sequence[Block],
        seen: list[tuple[str, set[str]]],
        memo: Checked | None,
    ) -> Checked | str:
        """What gather knows of a provider's valid blocks, or what is wrong with them (the
        first problem, in block order). The blocks ``memo`` checked last time are not looked
        at one by one again: only their ids against other providers' (set operations)."""
        known = 0
        ids: set[str] = set()
        session = False
        prior: Sequence[Block] | None = None
        if memo is not None and len(blocks) == len(memo.blocks) and blocks == memo.blocks:
            clash = _clash(memo, seen)  # the same blocks: the memo's copy stands for them
            if clash is not None:
                return clash
            memo.prior = memo.blocks
            return memo
        # Copied first: nothing below reads the provider's list (it may change afterwards);
        # a ``Chunked`` cannot change, and one that grew from the last shares its chunks.
        kept = blocks if isinstance(blocks, Chunked) else list(blocks)
        if memo is not None and len(kept) > len(memo.blocks) and starts_with(kept, memo.blocks):
            clash = _clash(memo, seen)
            if clash is not None:
                return clash
            # The memo is replaced by what this returns: its id set can grow in place.
            known, ids, session, prior = len(memo.blocks), memo.ids, memo.session, memo.blocks
        for block in kept[known:]:
            if not isinstance(block, Block):
                return f"yielded {type(block).__name__}, expected Block"
            layers = self.registry.layers
            if block.layer not in layers:
                return (
                    f"yielded block {block.id!r} for unknown layer {block.layer!r}; "
                    f"known: {', '.join(sorted(layers))}"
                )
            if provider.layers and block.layer not in provider.layers:
                return (
                    f"yielded block {block.id!r} for layer {block.layer!r}, but declares only "
                    f"{', '.join(provider.layers)}"
                )
            if block.truncation not in self.registry.truncators:
                return f"yielded block {block.id!r} with unknown truncation {block.truncation!r}"
            origin = next((p for p, other in seen if block.id in other), "this provider")
            if origin != "this provider" or block.id in ids:
                return f"yielded block id {block.id!r} twice (first from {origin!r})"
            ids.add(block.id)
            session = session or block.layer == SESSION
        return Checked(blocks=kept, ids=ids, session=session, prior=prior)


def _clash(memo: Checked, seen: list[tuple[str, set[str]]]) -> str | None:
    """What is wrong when a block ``memo`` checked has the id of another provider's block."""
    for plugin, other in seen:
        if not memo.ids.isdisjoint(other):
            first = next(b.id for b in memo.blocks if b.id in other)
            return f"yielded block id {first!r} twice (first from {plugin!r})"
    return None


def starts_with(blocks: Sequence[Block], prefix: Sequence[Block]) -> bool:
    """Whether ``blocks`` begins with ``prefix`` 's blocks (equal by ``==``), without copying
    either or touching the identical ones: a ``Chunked`` that grew from ``prefix`` shares its
    chunks; ordering two lists looks for the first items that are not equal, at C speed
    (blocks have no order, so comparing those raises ``TypeError``; when there are none, the
    shorter list is the lesser)."""
    if isinstance(blocks, Chunked) and isinstance(prefix, Chunked):
        return blocks.startswith(prefix)
    whole = blocks if isinstance(blocks, list) else list(blocks)
    start = prefix if isinstance(prefix, list) else list(prefix)
    try:
        return start <= whole
    except TypeError:
        return False


def choose_history(state: InFlight, prefer: str, checked: dict[int, Checked]) -> None:
    """One source of history: the request's own (``history`` plugin) or the plugins' (the
    ledger), by ``[history] prefer`` when both supplied some; recorded for the report."""
    sources = {run.plugin for run in state.gathered if checked[run.key].session}
    others = sorted(sources - {REQUEST_HISTORY})
    if REQUEST_HISTORY in sources and others:
        drop = set(others) if prefer == "request" else {REQUEST_HISTORY}
        left = 0
        for run in state.gathered:
            if run.plugin in drop:
                kept = [b for b in run.blocks if b.layer != SESSION]
                left += len(run.blocks) - len(kept)
                run.replace(kept)
        used = "the request's" if prefer == "request" else f"{', '.join(others)}'s"
        state.warnings.append(
            f"history: {counted(left, 'block')} from {', '.join(sorted(drop))} left out; "
            f"{used} history is used ([history] prefer = {prefer!r})"
        )
        sources -= drop
    if sources == {REQUEST_HISTORY}:
        state.history_source = "request"
    elif sources:
        state.history_source = ", ".join(sorted(sources))


def _run_provider(provider: LayerProvider, ctx: ProviderContext) -> Sequence[Block]:
    """The provider's blocks as a list (its own list when it returns one: only read, and
    only while this assembly runs; what is kept between calls is a copy), or its
    ``Chunked`` (immutable: kept as it is)."""
    return _listed(provider.provide(ctx))


def _from_memory(provider: LayerProvider, ctx: ProviderContext) -> Sequence[Block] | None:
    """The provider's blocks from memory (``from_memory``), or ``None`` when it has none."""
    assert provider.from_memory is not None
    blocks = provider.from_memory(ctx)
    return None if blocks is None else _listed(blocks)


def _listed(blocks: Iterable[Block]) -> Sequence[Block]:
    if type(blocks) is list or isinstance(blocks, Chunked):
        return blocks
    return list(blocks)


def _failed(item: Attributed, what: str, exc: BaseException | None, warnings: list[str]) -> None:
    provider: LayerProvider = item.record
    message = f"layer provider {provider.name!r} {what}"
    if provider.required:
        _log.info("plugin %r: %s; the assembly fails", item.plugin, message, exc_info=exc)
        raise ProviderError(message, plugin=item.plugin) from exc
    _log.warning("plugin %r: %s; its blocks were left out", item.plugin, message, exc_info=exc)
    warnings.append(f"plugin {item.plugin!r}: {message}; its blocks were left out")

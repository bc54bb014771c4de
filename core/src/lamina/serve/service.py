"""What each endpoint does, without HTTP: one warm ``Assembler`` and the session store,
asynchronous throughout (blocking work runs on worker threads, so the event loop never waits).

Requests for one session run one at a time (an ``asyncio.Lock`` per label: an assembly that
compacts and a turn being recorded do not interleave); different sessions run concurrently.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any, TypeVar

from lamina.assembly.engine import Assembler
from lamina.errors import BudgetError, ConfigError, LaminaError, PluginError
from lamina.model.context import AssembledContext
from lamina.model.result import AgentResult
from lamina.plugins import Attributed, PluginInfo
from lamina.records import CompactionOutcome, CompactionRequest, SessionStats, SessionStore
from lamina.serve.wire import AssemblyInput, CompactionInput, Health, TurnRecorded, check_label

T = TypeVar("T")
#: Sessions whose last estimated input size is remembered for calibration.
REMEMBERED = 4096


class Service:
    """The service's state for its whole life: the assembler, the store, per-session locks
    and each session's last estimated input size (to calibrate estimating tokenizers)."""

    def __init__(self, assembler: Assembler, store: str | None = None) -> None:
        self.assembler = assembler
        self.store: Attributed | None = pick_store(assembler, store)
        self._locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}
        self._estimates: OrderedDict[str, tuple[str, int]] = OrderedDict()
        try:
            self.version = metadata.version("lamina")
        except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
            self.version = ""

    def warm(self) -> None:
        """Resolve the config's model now (its tokenizer and encoding), not on the first request."""
        self.assembler.model(self.assembler.config.model)

    def close(self) -> None:
        store = self._record()
        if store is not None and store.close is not None:
            store.close(self.assembler)
        self.assembler.close()

    # -- endpoints -----------------------------------------------------------------------

    def health(self) -> Health:
        return Health(
            status="ok",
            version=self.version,
            model=self.assembler.config.model,
            store=self.store.record.name if self.store is not None else None,
        )

    def plugins(self) -> list[PluginInfo]:
        infos = self.assembler.host.infos.values()
        return sorted(infos, key=lambda i: (not i.builtin, i.name))

    async def assemble(self, body: AssemblyInput) -> AssembledContext:
        request = body.to_request(self.assembler)
        label = request.session_label
        store = self._record()
        own = request.history is not None and self.assembler.config.history.prefer == "request"
        async with self._session(label):
            if store is None or own:
                ctx = await self.assembler.aassemble(request)
            elif store.aassemble is not None:
                ctx = await self._call(store.aassemble, self.assembler, request)
            else:
                ctx = await self._call(asyncio.to_thread, store.assemble, self.assembler, request)
        self._remember(label, ctx)
        return ctx

    async def record(self, label: str, result: AgentResult) -> TurnRecorded:
        check_label(label, key="label")
        store = self._required()
        async with self._session(label):
            turn = await self._call(asyncio.to_thread, store.record, self.assembler, label, result)
        self._calibrate(label, result)
        return TurnRecorded(session_label=label, turn_id=turn)

    async def compact(self, label: str, body: CompactionInput) -> CompactionOutcome:
        check_label(label, key="label")
        store = self._required()
        fields: dict[str, Any] = {"session_label": label}
        if body.model is not None:
            fields["model"] = body.model
        if body.max_tokens is not None:
            fields["max_tokens"] = body.max_tokens
        request = self.assembler.request("", **fields)
        compaction = CompactionRequest(
            trigger=body.trigger, target=body.target, instructions=body.instructions
        )
        async with self._session(label):
            return await self._call(
                asyncio.to_thread, store.compact, self.assembler, request, compaction
            )

    async def stats(self, label: str) -> SessionStats:
        check_label(label, key="label")
        store = self._required()
        return await self._call(asyncio.to_thread, store.stats, self.assembler, label)

    async def turn_stats(self, label: str) -> Mapping[str, Any]:
        """The session's statistics turn by turn (the store's ``turn_stats``)."""
        data: Mapping[str, Any] = await self._stats_view(label, "turn_stats", "per-turn statistics")
        return data

    async def stats_page(self, label: str) -> str:
        """The session's statistics as one HTML page (the store's ``stats_page``)."""
        page: str = await self._stats_view(label, "stats_page", "statistics page")
        return page

    # -- internals -----------------------------------------------------------------------

    async def _stats_view(self, label: str, what: str, words: str) -> Any:
        check_label(label, key="label")
        store = self._required()
        view = getattr(store, what)
        if view is None:
            raise ConfigError(f"the session store {store.name!r} has no {words}", key=what)
        return await self._call(asyncio.to_thread, view, self.assembler, label)

    def _record(self) -> SessionStore | None:
        return None if self.store is None else self.store.record

    def _required(self) -> SessionStore:
        store = self._record()
        if store is None:
            raise ConfigError(
                "no session store is configured (install the ledger plugin and give "
                "[plugins.ledger] database)",
                file=self.assembler.config.path,
                key="plugins.ledger.database",
            )
        return store

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Await a store call; an error that names no plugin is attributed to the store's."""
        try:
            return await fn(*args)
        except (ConfigError, BudgetError, PluginError):
            raise
        except LookupError as exc:
            if isinstance(exc, KeyError | IndexError):
                raise self._attributed(exc) from exc
            raise
        except Exception as exc:
            raise self._attributed(exc) from exc

    def _attributed(self, exc: Exception) -> PluginError:
        plugin = self.store.plugin if self.store is not None else None
        what = str(exc) if isinstance(exc, LaminaError) else f"{type(exc).__name__}: {exc}"
        return PluginError(what, plugin=plugin)

    @asynccontextmanager
    async def _session(self, label: str) -> AsyncIterator[None]:
        """One request at a time per session (the lock is dropped when nobody waits on it)."""
        entry = self._locks.get(label)
        if entry is None:
            entry = self._locks[label] = (asyncio.Lock(), [0])
        entry[1][0] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1][0] -= 1
            if not entry[1][0]:
                del self._locks[label]

    def _remember(self, label: str, ctx: AssembledContext) -> None:
        self._estimates[label] = (ctx.model, ctx.token_budget.used.total)
        self._estimates.move_to_end(label)
        while len(self._estimates) > REMEMBERED:
            self._estimates.popitem(last=False)

    def _calibrate(self, label: str, result: AgentResult) -> None:
        """Feed the provider's input count to an estimating tokenizer (``observe``), against
        what the session's last assembly estimated for the same model."""
        found = self._estimates.pop(label, None)
        reported = result.usage.input_tokens
        if found is None or reported <= 0:
            return
        model, estimated = found
        if result.model is not None and result.model != model:
            return
        tokenizer = self.assembler.model(model).tokenizer
        observe = getattr(tokenizer, "observe", None)
        if not tokenizer.exact and callable(observe):
            observe(estimated, reported)


def pick_store(assembler: Assembler, name: str | None) -> Attributed | None:
    """The session store named ``name``, or the only one installed (``None`` when none is)."""
    stores = {item.record.name: item for item in assembler.registry.session_stores}
    if name is not None:
        if name not in stores:
            known = ", ".join(sorted(stores)) or "none"
            raise ConfigError(f"no session store {name!r}; installed: {known}", key="--store")
        return stores[name]
    if len(stores) > 1:
        raise ConfigError(
            f"several session stores are installed ({', '.join(sorted(stores))}): pick one "
            "with --store",
            key="--store",
        )
    return next(iter(stores.values()), None)

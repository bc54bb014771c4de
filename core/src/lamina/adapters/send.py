"""Sending: an adapter's payload through its provider's official SDK, the reply read back as
the kernel's ``AgentResult``.

An adapter plugin describes its SDK in a ``Transport`` (which package, how to make a client,
how to post a payload, how to read a reply); ``sending`` gives the adapter ``send`` and
``asend`` from it. The SDK is imported only when the first request is sent, so a plugin
without its ``sdk`` extra installed still builds payloads.
"""

from __future__ import annotations

import importlib
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from attrs import evolve, frozen

from lamina.adapters.wire import json_safe
from lamina.errors import PluginError
from lamina.model import AgentResult, AssembledContext, Message
from lamina.records import Adapter

if TYPE_CHECKING:  # asyncio (with ssl and socket) loads only when asend runs
    import asyncio


class SendError(PluginError):
    """Sending through an adapter failed: the provider refused or could not be reached, its
    reply could not be read, or its SDK is missing. ``status`` is the HTTP status when the
    provider answered; ``overflow`` says the provider found the context too long."""

    overflow = False

    def __init__(
        self, message: str, *, plugin: str, adapter: str, status: int | None = None
    ) -> None:
        self.adapter = adapter
        self.status = status
        super().__init__(f"adapter {adapter!r}: {message}", plugin=plugin)


class ContextOverflowError(SendError):
    """The provider refused the request as longer than the model's context window (what sends
    a host down the reactive-compaction path; the adapter's ``is_context_overflow`` says yes)."""

    overflow = True


class MissingSDKError(SendError):
    """The provider's SDK is not installed; the message names the extra that installs it."""


#: The stop reasons ``AgentResult.stop_reason`` uses for every provider (Anthropic's names).
_STOPS = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "completed": "end_turn",
    "stop_sequence": "stop_sequence",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
    "safety": "refusal",
    "refusal": "refusal",
}


def stop_reason(raw: Any, *, tool_calls: bool) -> str:
    """A provider's finish reason in the kernel's words: ``end_turn``, ``tool_use`` (also
    whenever the reply calls tools and ended normally), ``max_tokens``, ``refusal``,
    ``stop_sequence``; any other reason lower-cased as it came."""
    text = str(getattr(raw, "value", raw) or "").strip().lower()
    reason = _STOPS.get(text, text or "end_turn")
    return "tool_use" if tool_calls and reason == "end_turn" else reason


@frozen(kw_only=True)
class Reply:
    """What a provider answered: the assistant message (text and tool calls) and why it
    stopped (``stop_reason``'s words)."""

    message: Message
    stop_reason: str = "end_turn"


@frozen(kw_only=True)
class Transport:
    """How one adapter's payloads reach its provider through the provider's official SDK.

    ``sdk`` is the package to import (``openai``, ``google.genai``); ``extra`` what installs it
    (``lamina-openai[sdk]``). ``client()`` / ``aclient()`` make a synchronous / asyncio client
    (once per assembler, and once per event loop); ``call(client, payload, model)`` posts the
    payload exactly as built (``model``: the context's, for APIs that put it in the path) and
    returns the provider's response (``acall`` awaits it);
    ``reply(response)`` reads the answer. ``endpoint`` says where requests go, for errors.
    """

    plugin: str
    sdk: str
    extra: str
    client: Callable[[], Any]
    aclient: Callable[[], Any]
    call: Callable[[Any, dict[str, Any], str], Any]
    acall: Callable[[Any, dict[str, Any], str], Awaitable[Any]]
    reply: Callable[[Any], Reply]
    endpoint: str = ""


class _Clients:
    """The SDK clients of one adapter: one synchronous, one per running event loop (an
    asyncio client's connections belong to the loop that opened them)."""

    def __init__(self, transport: Transport, adapter: str) -> None:
        self.transport = transport
        self.adapter = adapter
        self.lock = threading.Lock()
        self.sync: Any = None
        self.loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Any:
        with self.lock:
            if self.sync is None:
                self.sync = self._make(self.transport.client)
            return self.sync

    def aget(self) -> Any:
        import asyncio

        loop = asyncio.get_running_loop()
        with self.lock:
            found = self.loops.get(loop)
            if found is None:
                found = self.loops[loop] = self._make(self.transport.aclient)
            return found

    def _make(self, factory: Callable[[], Any]) -> Any:
        t = self.transport
        try:
            importlib.import_module(t.sdk)
        except ImportError as exc:
            raise MissingSDKError(
                f"sending needs the {t.sdk!r} package, which is not installed; "
                f"install it with: pip install '{t.extra}'",
                plugin=t.plugin,
                adapter=self.adapter,
            ) from exc
        try:
            return factory()
        except Exception as exc:
            raise SendError(
                f"could not make the {t.sdk} client: {exc}", plugin=t.plugin, adapter=self.adapter
            ) from exc


def sending(adapter: Adapter, transport: Transport) -> Adapter:
    """``adapter`` with ``send`` and ``asend`` posting its payloads through ``transport``.

    ``send(context, options)`` builds ``build_request(context, options)`` (never streamed),
    posts it and returns an ``AgentResult``: the assistant's message, the usage
    ``parse_usage`` reads (cached tokens included), the stop reason, the context's model and
    this adapter as provider. A provider error is a ``ContextOverflowError`` when the
    adapter's ``is_context_overflow`` says so, else a ``SendError``; a missing SDK is a
    ``MissingSDKError`` naming the extra to install."""
    clients = _Clients(transport, adapter.name)
    build = adapter.build_request

    def payload(context: AssembledContext, options: Mapping[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = json_safe(build(context, {**(options or {}), "stream": False}))
        return body

    def send(context: AssembledContext, options: Mapping[str, Any] | None = None) -> AgentResult:
        body = payload(context, options)
        client = clients.get()
        try:
            response = transport.call(client, body, context.model)
        except Exception as exc:
            raise _failure(adapter, transport, exc) from exc
        return _result(adapter, transport, context, response)

    async def asend(
        context: AssembledContext, options: Mapping[str, Any] | None = None
    ) -> AgentResult:
        body = payload(context, options)
        client = clients.aget()
        try:
            response = await transport.acall(client, body, context.model)
        except Exception as exc:
            raise _failure(adapter, transport, exc) from exc
        return _result(adapter, transport, context, response)

    return evolve(adapter, send=send, asend=asend)


def _result(
    adapter: Adapter, transport: Transport, context: AssembledContext, response: Any
) -> AgentResult:
    try:
        reply = transport.reply(response)
        usage = adapter.parse_usage(response)
    except Exception as exc:
        raise SendError(
            f"could not read the provider's reply: {type(exc).__name__}: {exc}",
            plugin=transport.plugin,
            adapter=adapter.name,
        ) from exc
    return AgentResult(
        messages=(reply.message,),
        usage=usage,
        stop_reason=reply.stop_reason,
        model=context.model,
        provider=adapter.name,
    )


def _failure(adapter: Adapter, transport: Transport, exc: Exception) -> SendError:
    """The SDK's exception as the kernel's: an overflow when the adapter says so."""
    if isinstance(exc, SendError):
        return exc
    status = _status(exc)
    where = f" to {transport.endpoint}" if transport.endpoint else ""
    code = f" (HTTP {status})" if status is not None else ""
    message = f"sending{where} failed{code}: {type(exc).__name__}: {exc}"
    kind = ContextOverflowError if adapter.is_context_overflow(exc) else SendError
    return kind(message, plugin=transport.plugin, adapter=adapter.name, status=status)


def _status(exc: Exception) -> int | None:
    """The HTTP status an SDK exception carries (``status_code``, ``code`` for Google's, or
    its HTTP ``response``'s)."""
    response = getattr(exc, "response", None)
    for value in (
        getattr(exc, "status_code", None),
        getattr(exc, "code", None),
        getattr(response, "status_code", None),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
            return value
    return None

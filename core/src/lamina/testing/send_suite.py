"""The conformance suite for an adapter's ``send`` / ``asend``, against a local server that
speaks the provider's wire protocol (``WireServer``) through the provider's real SDK.

Subclass ``SendConformance`` in a test module (its name must start with ``Test``) and fill in
what it asks for: the plugin, the adapter and model, where the SDK posts, a recorded reply
with what it must read as, and the provider's overflow error. The suite checks, synchronously
and with asyncio: the server receives exactly ``build_request``'s payload; the reply, usage
(cached tokens included) and stop reason are read back; an overflow is a
``ContextOverflowError`` the adapter's ``is_context_overflow`` recognises; any other error,
an unreachable provider and a missing SDK are ``SendError``s naming the plugin (and the extra
to install); the LLM summarizer the plugin registers sends the compaction prompt.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from typing import Any, ClassVar

import pytest

from lamina.adapters import (
    COMPACTION_PROMPT,
    ContextOverflowError,
    MissingSDKError,
    SendError,
    SummaryError,
)
from lamina.model import AgentResult, AssembledContext, Block, Message, Provenance, Usage
from lamina.records import Adapter
from lamina.testing import make_assembler
from lamina.testing.adapter_contexts import SCENARIOS, make_context
from lamina.testing.wire_server import Answer, WireServer

__all__ = ["KEY_ENV", "SendConformance"]

#: The environment variable the suite's settings name as ``api_key_env``.
KEY_ENV = "LAMINA_TEST_PROVIDER_KEY"
KEY = "test-key-not-secret"


class SendConformance:
    """Tests every adapter that sends must pass; set what is marked *subclass*."""

    #: subclass: the plugin object, its name, the adapter under test and a model it serves
    plugin: ClassVar[Any] = None
    plugin_name: ClassVar[str] = ""
    adapter: ClassVar[str] = ""
    model: ClassVar[str] = ""
    #: subclass: the SDK's import name and the extra that installs it
    sdk: ClassVar[str] = ""
    extra: ClassVar[str] = ""
    #: subclass: the path the SDK posts to, and what follows the server's URL in ``base_url``
    path: ClassVar[str] = ""
    base_path: ClassVar[str] = ""
    #: subclass: a recorded reply, and the message, usage and stop reason it must read as
    reply: ClassVar[dict[str, Any]] = {}
    message: ClassVar[Message | None] = None
    usage: ClassVar[Usage] = Usage()
    stop_reason: ClassVar[str] = "end_turn"
    #: subclass: a recorded reply with no content, and the provider's overflow error
    empty_reply: ClassVar[dict[str, Any]] = {}
    overflow: ClassVar[Answer] = Answer(status=400)
    #: a provider failure that is not an overflow
    failure: ClassVar[Answer] = Answer(status=500, body={"error": {"message": "upstream broke"}})

    # -- helpers -------------------------------------------------------------------------

    def settings(self, url: str) -> dict[str, Any]:
        """The plugin's settings that send to ``url`` (the suite's server)."""
        return {"base_url": url + self.base_path, "api_key_env": KEY_ENV, "max_retries": 0}

    def make(self, url: str, **extra: Any) -> Any:
        config = {"model": self.model, "plugins": {self.plugin_name: self.settings(url) | extra}}
        return make_assembler(config, plugins=[(self.plugin_name, self.plugin)])

    def sender(self, url: str) -> Adapter:
        adapter: Adapter = self.make(url).adapter(self.adapter)
        return adapter

    def context(self) -> AssembledContext:
        history = SCENARIOS["tool-round-trip"] + SCENARIOS["simple"]
        return make_context(model=self.model, provider=self.adapter, history=history)

    @pytest.fixture(autouse=True)
    def _key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(KEY_ENV, KEY)

    def _check(
        self, server: WireServer, adapter: Adapter, ctx: AssembledContext, result: Any
    ) -> None:
        assert isinstance(result, AgentResult)
        got = server.requests[-1]
        assert got.method == "POST" and got.path.split("?")[0] == self.path
        assert got.body == adapter.build_request(ctx, {})
        assert any(KEY in value for value in got.headers.values())  # in the SDK's header
        assert result.messages == (self.message,)
        assert result.usage == self.usage
        assert result.stop_reason == self.stop_reason
        assert (result.model, result.provider) == (ctx.model, self.adapter)

    # -- the checks ----------------------------------------------------------------------

    def test_send_posts_the_payload_as_built_and_reads_the_reply(self) -> None:
        with WireServer(Answer(body=self.reply)) as server:
            adapter, ctx = self.sender(server.url), self.context()
            assert adapter.send is not None and adapter.asend is not None
            self._check(server, adapter, ctx, adapter.send(ctx, {}))

    def test_asend_does_the_same_from_asyncio(self) -> None:
        with WireServer(Answer(body=self.reply)) as server:
            adapter, ctx = self.sender(server.url), self.context()
            assert adapter.asend is not None
            asend = adapter.asend

            async def twice() -> list[AgentResult]:  # one client per loop, reused
                return [await asend(ctx, {}), await asend(ctx, {})]

            for result in asyncio.run(twice()):
                self._check(server, adapter, ctx, result)
            assert len(server.requests) == 2

    def test_an_overflow_is_a_context_overflow_error_the_adapter_recognises(self) -> None:
        with WireServer(self.overflow) as server:
            adapter = self.sender(server.url)
            assert adapter.send is not None
            with pytest.raises(ContextOverflowError) as raised:
                adapter.send(self.context(), {})
        assert adapter.is_context_overflow(raised.value)
        assert raised.value.status == self.overflow.status
        assert f"plugin {self.plugin_name!r}" in str(raised.value)

    def test_another_provider_error_is_a_send_error_naming_plugin_and_status(self) -> None:
        with WireServer(self.failure) as server:
            adapter = self.sender(server.url)
            assert adapter.send is not None and adapter.asend is not None
            with pytest.raises(SendError) as raised:
                adapter.send(self.context(), {})
            asend = adapter.asend

            async def once() -> AgentResult:
                return await asend(self.context(), {})

            with pytest.raises(SendError) as araised:
                asyncio.run(once())
        for error in (raised.value, araised.value):
            assert not isinstance(error, ContextOverflowError)
            assert not adapter.is_context_overflow(error)
            assert error.status == self.failure.status
            text = str(error)
            assert f"plugin {self.plugin_name!r}" in text and f"HTTP {self.failure.status}" in text

    def test_an_unreachable_provider_is_a_send_error(self) -> None:
        with socket.socket() as sock:  # a port nothing listens on
            sock.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        adapter = self.sender(url)
        assert adapter.send is not None
        with pytest.raises(SendError) as raised:
            adapter.send(self.context(), {})
        assert raised.value.status is None and "127.0.0.1" in str(raised.value)

    def test_a_missing_sdk_names_the_extra_to_install(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, self.sdk, None)  # import now fails
        with WireServer(Answer(body=self.reply)) as server:
            adapter = self.sender(server.url)
            assert adapter.send is not None
            payload = adapter.build_request(self.context(), {})  # building needs no SDK
            with pytest.raises(MissingSDKError) as raised:
                adapter.send(self.context(), {})
            assert server.requests == []
        assert payload and self.extra in str(raised.value)

    def test_the_llm_summarizer_sends_the_compaction_prompt(self) -> None:
        previous = Block.text(
            "prev",
            "session",
            "[Previous conversation summary]\nGoal: ship v2",
            provenance=Provenance(metadata={"summary": "Goal: ship v2"}),
        )
        turn = Block.text("b1", "session", "Please rename config.toml to lamina.toml.", role="user")
        with WireServer(Answer(body=self.reply)) as server:
            a = self.make(
                server.url,
                summarizer={
                    "model": self.model,
                    "adapter": self.adapter,
                    "instructions": "Keep every path.",
                },
            )
            summarizer = a.summarizer(f"{self.plugin_name}-llm")
            tokenizer = a.model(self.model).tokenizer
            text = summarizer.run([previous, turn], 300, tokenizer, instructions="Mention v2.")
            sent = json.dumps(server.requests[-1].body, ensure_ascii=False)
        assert self.message is not None and text == self.message.text.strip()
        for piece in (
            COMPACTION_PROMPT.splitlines()[0],
            "Keep every path.",
            "Mention v2.",
            "Goal: ship v2",
            "rename config.toml to lamina.toml",
            "at most 300 tokens",
        ):
            assert piece in sent

    def test_the_llm_summarizer_refuses_an_empty_reply(self) -> None:
        with WireServer(Answer(body=self.empty_reply)) as server:
            a = self.make(server.url, summarizer={"model": self.model, "adapter": self.adapter})
            summarizer = a.summarizer(f"{self.plugin_name}-llm")
            block = Block.text("b1", "session", "Fix the build.", role="user")
            with pytest.raises(SummaryError, match="empty"):
                summarizer.run([block], 200, a.model(self.model).tokenizer)

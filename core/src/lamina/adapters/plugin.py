"""The hooks of an adapter plugin, built from the few things that set one adapter plugin apart
from another, so each declares only those."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from attrs import evolve

from lamina.adapters.catalog import ModelOverride
from lamina.adapters.send import Transport, sending
from lamina.adapters.settings import LlmSummarizerSettings
from lamina.adapters.summary import llm_summarizer
from lamina.adapters.wire import json_safe
from lamina.errors import ConfigError
from lamina.hookspecs import hookimpl
from lamina.model import AssembledContext
from lamina.records import Adapter, ModelInfo, Summarizer, Tokenizer


class HasModelOverrides(Protocol):
    """An adapter's settings: whatever else they hold, per-model overrides under ``models``."""

    @property
    def models(self) -> Mapping[str, ModelOverride]: ...


S = TypeVar("S", bound=HasModelOverrides)


class AdapterPlugin(Generic[S]):
    """An adapter plugin object: name it in the ``lamina`` entry point (``package:plugin``).

    Its hooks supply the settings class (``[plugins.<name>]``; its defaults when the section is
    absent), the adapters ``adapters(settings)`` returns, each payload they build made safe to
    encode as UTF-8 (``json_safe``), the model info ``model_info(model, settings.models)``
    answers, and, when ``tokenizer`` is given, a fresh ``tokenizer()`` for every model whose
    info names ``provider``. ``commands(cli)``, when given, adds command-line subcommands.
    Hooks it is not given are not registered at all.

    With ``transport(settings, adapter_name)`` (a ``Transport``, or ``None`` for an adapter
    that does not send) the adapters gain ``send`` / ``asend`` (see ``sending``), and a
    ``summarizer`` table in the settings (``LlmSummarizerSettings``) registers an LLM
    summarizer through one of them (``lamina_summarizers``), named ``<provider>-llm`` unless
    the table names it.
    """

    lamina_settings_class: Callable[[], type]
    lamina_adapters: Callable[[S | None], list[Adapter]]
    lamina_model_info: Callable[[str, S | None], ModelInfo | None]
    lamina_tokenizer: Callable[[str, ModelInfo], Tokenizer | None] | None
    lamina_commands: Callable[[Any], None] | None
    lamina_summarizers: Callable[[S | None], list[Summarizer]] | None

    def __init__(
        self,
        *,
        provider: str,
        settings_class: type[S],
        adapters: Callable[[S], Iterable[Adapter]],
        model_info: Callable[[str, Mapping[str, ModelOverride]], ModelInfo | None],
        tokenizer: Callable[[], Tokenizer] | None = None,
        commands: Callable[[Any], None] | None = None,
        transport: Callable[[S, str], Transport | None] | None = None,
    ) -> None:
        self.provider = provider

        @hookimpl
        def lamina_settings_class() -> type:
            return settings_class

        def made(settings: S) -> list[Adapter]:
            out = []
            for adapter in adapters(settings):
                safe = _encodable(adapter)
                way = transport(settings, adapter.name) if transport is not None else None
                out.append(sending(safe, way) if way is not None else safe)
            return out

        @hookimpl
        def lamina_adapters(settings: S | None) -> list[Adapter]:
            return made(settings or settings_class())

        @hookimpl
        def lamina_model_info(model: str, settings: S | None) -> ModelInfo | None:
            return model_info(model, (settings or settings_class()).models)

        self.lamina_settings_class = lamina_settings_class
        self.lamina_adapters = lamina_adapters
        self.lamina_model_info = lamina_model_info
        self.lamina_tokenizer = None
        self.lamina_commands = None
        self.lamina_summarizers = None
        if tokenizer is not None:
            make = tokenizer

            @hookimpl
            def lamina_tokenizer(model: str, info: ModelInfo) -> Tokenizer | None:
                return make() if info.provider == provider else None

            self.lamina_tokenizer = lamina_tokenizer
        if commands is not None:
            self.lamina_commands = hookimpl(commands)
        if transport is not None:

            @hookimpl
            def lamina_summarizers(settings: S | None) -> list[Summarizer]:
                chosen = settings or settings_class()
                wanted = getattr(chosen, "summarizer", None)
                if not isinstance(wanted, LlmSummarizerSettings):
                    return []
                return [
                    self._summarizer(wanted, made(chosen), model_info(wanted.model, chosen.models))
                ]

            self.lamina_summarizers = lamina_summarizers

    def __repr__(self) -> str:
        return f"AdapterPlugin(provider={self.provider!r})"

    def _summarizer(
        self, wanted: LlmSummarizerSettings, adapters: list[Adapter], info: ModelInfo | None
    ) -> Summarizer:
        """The LLM summarizer ``[plugins.<provider>.summarizer]`` asks for."""
        key = f"plugins.{self.provider}.summarizer"
        by_name = {a.name: a for a in adapters}
        name = wanted.adapter or adapters[0].name
        adapter = by_name.get(name)
        if adapter is None or adapter.send is None:
            sends = ", ".join(a.name for a in adapters if a.send is not None) or "none"
            raise ConfigError(
                f"no adapter {name!r} that sends; adapters that send: {sends}", key=f"{key}.adapter"
            )
        return llm_summarizer(
            adapter,
            model=wanted.model,
            name=wanted.name or f"{self.provider}-llm",
            instructions=wanted.instructions,
            max_tokens=wanted.max_tokens,
            context_window=info.context_window if info is not None else None,
        )


def _encodable(adapter: Adapter) -> Adapter:
    """``adapter`` whose payloads carry no lone surrogate (see ``json_safe``)."""
    build = adapter.build_request

    def build_request(context: AssembledContext, options: Mapping[str, Any]) -> dict[str, Any]:
        payload: dict[str, Any] = json_safe(build(context, options))
        return payload

    return evolve(adapter, build_request=build_request)

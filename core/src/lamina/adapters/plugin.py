"""The hooks of an adapter plugin, built from the few things that set one adapter plugin apart
from another, so each declares only those."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from attrs import evolve

from lamina.adapters.catalog import ModelOverride
from lamina.adapters.wire import json_safe
from lamina.hookspecs import hookimpl
from lamina.model import AssembledContext
from lamina.records import Adapter, ModelInfo, Tokenizer


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
    """

    lamina_settings_class: Callable[[], type]
    lamina_adapters: Callable[[S | None], list[Adapter]]
    lamina_model_info: Callable[[str, S | None], ModelInfo | None]
    lamina_tokenizer: Callable[[str, ModelInfo], Tokenizer | None] | None
    lamina_commands: Callable[[Any], None] | None

    def __init__(
        self,
        *,
        provider: str,
        settings_class: type[S],
        adapters: Callable[[S], Iterable[Adapter]],
        model_info: Callable[[str, Mapping[str, ModelOverride]], ModelInfo | None],
        tokenizer: Callable[[], Tokenizer] | None = None,
        commands: Callable[[Any], None] | None = None,
    ) -> None:
        self.provider = provider

        @hookimpl
        def lamina_settings_class() -> type:
            return settings_class

        @hookimpl
        def lamina_adapters(settings: S | None) -> list[Adapter]:
            return [_encodable(a) for a in adapters(settings or settings_class())]

        @hookimpl
        def lamina_model_info(model: str, settings: S | None) -> ModelInfo | None:
            return model_info(model, (settings or settings_class()).models)

        self.lamina_settings_class = lamina_settings_class
        self.lamina_adapters = lamina_adapters
        self.lamina_model_info = lamina_model_info
        self.lamina_tokenizer = None
        self.lamina_commands = None
        if tokenizer is not None:
            make = tokenizer

            @hookimpl
            def lamina_tokenizer(model: str, info: ModelInfo) -> Tokenizer | None:
                return make() if info.provider == provider else None

            self.lamina_tokenizer = lamina_tokenizer
        if commands is not None:
            self.lamina_commands = hookimpl(commands)

    def __repr__(self) -> str:
        return f"AdapterPlugin(provider={self.provider!r})"


def _encodable(adapter: Adapter) -> Adapter:
    """``adapter`` whose payloads carry no lone surrogate (see ``json_safe``)."""
    build = adapter.build_request

    def build_request(context: AssembledContext, options: Mapping[str, Any]) -> dict[str, Any]:
        payload: dict[str, Any] = json_safe(build(context, options))
        return payload

    return evolve(adapter, build_request=build_request)

"""Hook implementations of the ``openai`` plugin: two adapters and OpenAI model info."""

from __future__ import annotations

from functools import partial

from lamina import Adapter, ModelInfo, hookimpl
from lamina_openai import chat, responses
from lamina_openai.models import model_info
from lamina_openai.settings import DEFAULTS, OpenAISettings


@hookimpl
def lamina_settings_class() -> type:
    return OpenAISettings


@hookimpl
def lamina_adapters(settings: OpenAISettings | None) -> list[Adapter]:
    """``openai`` (Chat Completions) and ``openai-responses`` (Responses)."""
    settings = settings or DEFAULTS
    return [
        Adapter(
            name="openai",
            build_request=partial(chat.build, settings=settings),
            parse_usage=chat.parse_usage,
            is_context_overflow=chat.is_context_overflow,
            description="OpenAI Chat Completions (POST /v1/chat/completions)",
        ),
        Adapter(
            name="openai-responses",
            build_request=partial(responses.build, settings=settings),
            parse_usage=chat.parse_usage,
            is_context_overflow=chat.is_context_overflow,
            description="OpenAI Responses (POST /v1/responses)",
        ),
    ]


@hookimpl
def lamina_model_info(model: str, settings: OpenAISettings | None) -> ModelInfo | None:
    """OpenAI models from models.dev, with `[plugins.openai.models]` overrides."""
    return model_info(model, (settings or DEFAULTS).models)

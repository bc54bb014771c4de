"""Hook implementations of the ``anthropic`` plugin: the adapter, Claude model info and a
calibrated token estimate for Claude models."""

from __future__ import annotations

from functools import partial

from lamina_openai.estimate import CalibratedEstimate

from lamina import Adapter, ModelInfo, Tokenizer, hookimpl
from lamina_anthropic import messages
from lamina_anthropic.models import model_info
from lamina_anthropic.settings import DEFAULTS, AnthropicSettings


@hookimpl
def lamina_settings_class() -> type:
    return AnthropicSettings


@hookimpl
def lamina_adapters(settings: AnthropicSettings | None) -> list[Adapter]:
    settings = settings or DEFAULTS
    return [
        Adapter(
            name="anthropic",
            build_request=partial(messages.build, settings=settings),
            parse_usage=messages.parse_usage,
            is_context_overflow=messages.is_context_overflow,
            description="Anthropic Messages (POST /v1/messages)",
        )
    ]


@hookimpl
def lamina_model_info(model: str, settings: AnthropicSettings | None) -> ModelInfo | None:
    """Claude models from models.dev, with `[plugins.anthropic.models]` overrides."""
    return model_info(model, (settings or DEFAULTS).models)


@hookimpl
def lamina_tokenizer(model: str, info: ModelInfo) -> Tokenizer | None:
    """Claude has no offline tokenizer: an estimate flagged inexact, calibratable from usage."""
    if info.provider != "anthropic":
        return None
    return CalibratedEstimate(chars_per_token=3.5, label="claude-estimate")

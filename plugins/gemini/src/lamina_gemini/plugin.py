"""Hook implementations of the ``gemini`` plugin: the adapter, Gemini model info and a
calibrated token estimate for Gemini models."""

from __future__ import annotations

from functools import partial

from lamina_openai.estimate import CalibratedEstimate

from lamina import Adapter, ModelInfo, Tokenizer, hookimpl
from lamina_gemini import contents
from lamina_gemini.models import PROVIDER, model_info
from lamina_gemini.settings import DEFAULTS, GeminiSettings


@hookimpl
def lamina_settings_class() -> type:
    return GeminiSettings


@hookimpl
def lamina_adapters(settings: GeminiSettings | None) -> list[Adapter]:
    settings = settings or DEFAULTS
    return [
        Adapter(
            name=PROVIDER,
            build_request=partial(contents.build, settings=settings),
            parse_usage=contents.parse_usage,
            is_context_overflow=contents.is_context_overflow,
            description="Google Gemini (POST /v1beta/models/{model}:generateContent)",
        )
    ]


@hookimpl
def lamina_model_info(model: str, settings: GeminiSettings | None) -> ModelInfo | None:
    """Gemini models from models.dev, with `[plugins.gemini.models]` overrides."""
    return model_info(model, (settings or DEFAULTS).models)


@hookimpl
def lamina_tokenizer(model: str, info: ModelInfo) -> Tokenizer | None:
    """Gemini has no offline tokenizer here: an estimate flagged inexact, calibratable."""
    if info.provider != PROVIDER:
        return None
    return CalibratedEstimate(chars_per_token=4.0, label="gemini-estimate")

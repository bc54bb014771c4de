"""Hook implementations of the ``ollama`` plugin: the adapter and Ollama model info."""

from __future__ import annotations

from functools import partial

from lamina_openai.estimate import CalibratedEstimate

from lamina import Adapter, ModelInfo, Tokenizer, hookimpl
from lamina_ollama import chat
from lamina_ollama.models import PROVIDER, model_info
from lamina_ollama.settings import DEFAULTS, OllamaSettings


@hookimpl
def lamina_settings_class() -> type:
    return OllamaSettings


@hookimpl
def lamina_adapters(settings: OllamaSettings | None) -> list[Adapter]:
    settings = settings or DEFAULTS
    return [
        Adapter(
            name=PROVIDER,
            build_request=partial(chat.build, settings=settings),
            parse_usage=chat.parse_usage,
            is_context_overflow=chat.is_context_overflow,
            native_system=False,
            description="Ollama native chat (POST /api/chat)",
        )
    ]


@hookimpl
def lamina_model_info(model: str, settings: OllamaSettings | None) -> ModelInfo | None:
    """Ollama models (``name:tag`` or ``ollama/name``), with `[plugins.ollama.models]` overrides."""
    return model_info(model, (settings or DEFAULTS).models)


@hookimpl
def lamina_tokenizer(model: str, info: ModelInfo) -> Tokenizer | None:
    """Local models' tokenizers are not available offline: a calibratable estimate."""
    if info.provider != PROVIDER:
        return None
    return CalibratedEstimate(chars_per_token=4.0, label="ollama-estimate")

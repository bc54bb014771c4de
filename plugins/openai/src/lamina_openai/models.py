"""What Lamina knows of OpenAI models: limits from models.dev, the tiktoken encoding (both
through the adapter kit), reasoning families, and the chat framing ``counting`` describes."""

from __future__ import annotations

from collections.abc import Mapping

from attrs import evolve

from lamina import ModelInfo
from lamina.adapters import ModelOverride, catalog_model_info, encoding_for_model, normalize
from lamina_openai.counting import MESSAGE_OVERHEAD, REPLY_OVERHEAD, count_tools

PROVIDER = "openai"
#: OpenAI's automatic prompt caching applies from 1024 prompt tokens on.
MIN_CACHE_PREFIX = 1024
#: Reasoning families, which take ``developer`` instead of ``system`` messages.
_REASONING = ("o1", "o3", "o4", "gpt-5")


def is_reasoning(model: str) -> bool:
    """o-series and gpt-5 models, which take ``developer`` instead of ``system`` messages."""
    return normalize(model).lower().startswith(_REASONING)


def _ours(model: str) -> bool:
    prefix, _, rest = model.strip().rpartition("/")
    return rest != "" and prefix in ("", PROVIDER)


def model_info(model: str, overrides: Mapping[str, ModelOverride]) -> ModelInfo | None:
    """OpenAI's limits for ``model``, or ``None`` when it is not an OpenAI model."""
    if not _ours(model):
        return None
    chat = not normalize(model).startswith("text-embedding")
    info = catalog_model_info(
        PROVIDER,
        model,
        overrides,
        provider=PROVIDER,
        min_cache_prefix=MIN_CACHE_PREFIX,
        framing=(MESSAGE_OVERHEAD, REPLY_OVERHEAD) if chat else (0, 0),
    )
    if info is None:
        return None
    return evolve(
        info, encoding=encoding_for_model(model), tool_tokens=count_tools if chat else None
    )

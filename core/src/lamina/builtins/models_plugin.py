"""The fallback model table of seed 000: context windows by model family, 128k when unknown."""

from __future__ import annotations

import re

from lamina.hookspecs import hookimpl
from lamina.records import ModelInfo

#: model family → (context window, max output, provider)
MODEL_LIMITS: dict[str, tuple[int, int | None, str]] = {
    "claude-sonnet-4": (200_000, 64_000, "anthropic"),
    "claude-opus-4": (200_000, 32_000, "anthropic"),
    "claude-haiku-4": (200_000, 64_000, "anthropic"),
    "claude-3-5-sonnet": (200_000, 8_192, "anthropic"),
    "claude-3-5-haiku": (200_000, 8_192, "anthropic"),
    "gpt-4o": (128_000, 16_384, "openai"),
    "gpt-4o-mini": (128_000, 16_384, "openai"),
    "gpt-4.1": (1_047_576, 32_768, "openai"),
    "gpt-4": (8_192, 8_192, "openai"),
    "gpt-3.5-turbo": (16_385, 4_096, "openai"),
    "o1": (200_000, 100_000, "openai"),
    "o3": (200_000, 100_000, "openai"),
    "o4-mini": (200_000, 100_000, "openai"),
}
DEFAULT_CONTEXT_WINDOW = 128_000
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def normalize_model(model: str) -> str:
    """``claude-sonnet-4-20250514`` → ``claude-sonnet-4``; a ``provider/`` prefix is dropped."""
    base = model.rsplit("/", 1)[-1]
    return _DATE_SUFFIX.sub("", base)


@hookimpl(trylast=True)
def lamina_model_info(model: str) -> ModelInfo:
    from lamina.tokens import encoding_for_model

    base = normalize_model(model)
    known = MODEL_LIMITS.get(base)
    window, max_output, provider = known or (DEFAULT_CONTEXT_WINDOW, None, None)
    return ModelInfo(
        name=base,
        context_window=window,
        max_output=max_output,
        provider=provider,
        encoding=encoding_for_model(base),
        assumed=known is None,
    )

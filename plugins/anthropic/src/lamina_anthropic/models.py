"""Claude model limits: context window and max output from models.dev, the minimum cacheable
prompt length from Anthropic's prompt-caching documentation (models.dev does not carry it)."""

from __future__ import annotations

from collections.abc import Mapping

from lamina import ModelInfo
from lamina.adapters import ModelOverride, catalog_model_info, normalize

PROVIDER = "anthropic"
#: Minimum cacheable prompt length by model family prefix (longest prefix wins); others 1024.
MIN_CACHE_PREFIX: dict[str, int] = {
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-7": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
DEFAULT_MIN_CACHE_PREFIX = 1024


def min_cache_prefix(model: str) -> int:
    base = normalize(model)
    matches = [p for p in MIN_CACHE_PREFIX if base.startswith(p)]
    return MIN_CACHE_PREFIX[max(matches, key=len)] if matches else DEFAULT_MIN_CACHE_PREFIX


def model_info(model: str, overrides: Mapping[str, ModelOverride]) -> ModelInfo | None:
    """Anthropic's limits for a ``claude-*`` model, or ``None`` for any other."""
    prefix, _, bare = model.strip().rpartition("/")
    if prefix not in ("", PROVIDER) or not bare.startswith("claude"):
        return None
    return catalog_model_info(
        PROVIDER, model, overrides, provider=PROVIDER, min_cache_prefix=min_cache_prefix(model)
    )

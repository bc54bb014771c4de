"""Gemini model limits from models.dev (provider ``google``) and the minimum prompt length
for implicit caching from Google's context-caching documentation."""

from __future__ import annotations

from collections.abc import Mapping

from lamina import ModelInfo
from lamina.adapters import ModelOverride, catalog_model_info

PROVIDER = "gemini"
CATALOG = "google"
#: Minimum tokens for implicit caching: Pro models need more than Flash ones.
MIN_CACHE_PRO = 4096
MIN_CACHE_FLASH = 1024


def model_info(model: str, overrides: Mapping[str, ModelOverride]) -> ModelInfo | None:
    """Google's limits for a ``gemini-*`` model (``models/`` or ``google/`` prefix allowed)."""
    prefix, _, bare = model.strip().rpartition("/")
    if prefix not in ("", "models", "google", PROVIDER) or not bare.startswith("gemini"):
        return None
    minimum = MIN_CACHE_PRO if "-pro" in bare else MIN_CACHE_FLASH
    return catalog_model_info(
        CATALOG, model, overrides, provider=PROVIDER, min_cache_prefix=minimum
    )

"""Ollama model limits: models.dev's ``ollama-cloud`` catalog where it lists the model, else
Ollama's default context length (the adapter sends the window as ``num_ctx``)."""

from __future__ import annotations

from collections.abc import Mapping

from lamina import ModelInfo
from lamina.adapters import ModelOverride, catalog_model_info

PROVIDER = "ollama"
CATALOG = "ollama-cloud"
#: Ollama's default ``num_ctx`` when nothing else is known.
DEFAULT_NUM_CTX = 4096


def local_name(model: str) -> str | None:
    """The name Ollama knows ``model`` by (``ollama/`` prefix dropped), or ``None`` when the
    name is not an Ollama one (Ollama names carry a ``:tag`` or the ``ollama/`` prefix)."""
    name = model.strip()
    if name.startswith("ollama/"):
        return name.removeprefix("ollama/")
    if ":" in name and "/" not in name and not name.startswith("ft:"):
        return name
    return None


def model_info(model: str, overrides: Mapping[str, ModelOverride]) -> ModelInfo | None:
    """Limits of an Ollama model, or ``None`` for any other model."""
    name = local_name(model)
    if name is None:
        return None
    return catalog_model_info(
        CATALOG, name, overrides, provider=PROVIDER, default_window=DEFAULT_NUM_CTX
    )

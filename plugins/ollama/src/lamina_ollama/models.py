"""Ollama model limits: models.dev's ``ollama-cloud`` catalog where it lists the model, else
Ollama's default context length (the adapter sends the window as ``num_ctx``)."""

from __future__ import annotations

from collections.abc import Mapping

from lamina_openai.catalog import ModelOverride, resolve

from lamina import ModelInfo

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
    limits, _ = resolve(CATALOG, name, overrides)
    return ModelInfo(
        name=name,
        context_window=limits.context_window if limits else DEFAULT_NUM_CTX,
        max_output=limits.max_output if limits else None,
        provider=PROVIDER,
    )

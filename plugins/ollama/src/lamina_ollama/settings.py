"""The ``[plugins.ollama]`` config section."""

from __future__ import annotations

from attrs import field, frozen

from lamina.adapters import ModelOverride, SendSettings


@frozen(kw_only=True)
class OllamaSettings(SendSettings):
    """``keep_alive`` (e.g. ``"10m"``) keeps the model loaded between turns so its KV cache
    of the stable prefix survives; ``models`` overrides limits per model name. Sending
    (``base_url``: the Ollama host, ``api_key_env``, ``timeout``, the ``summarizer`` table)
    is ``SendSettings``'."""

    keep_alive: str | None = None
    models: dict[str, ModelOverride] = field(factory=dict)

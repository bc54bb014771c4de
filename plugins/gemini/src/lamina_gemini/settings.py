"""The ``[plugins.gemini]`` config section."""

from __future__ import annotations

from attrs import field, frozen

from lamina.adapters import ModelOverride, SendSettings


@frozen(kw_only=True)
class GeminiSettings(SendSettings):
    """``models`` overrides limits per model name. Sending (``base_url``, ``api_key_env``,
    ``timeout``, ``max_retries``, the ``summarizer`` table) is ``SendSettings``'."""

    models: dict[str, ModelOverride] = field(factory=dict)

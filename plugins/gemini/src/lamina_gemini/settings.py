"""The ``[plugins.gemini]`` config section."""

from __future__ import annotations

from attrs import field, frozen

from lamina.adapters import ModelOverride


@frozen(kw_only=True)
class GeminiSettings:
    """``models`` overrides limits per model name."""

    models: dict[str, ModelOverride] = field(factory=dict)

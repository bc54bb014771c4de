"""The ``[plugins.anthropic]`` config section."""

from __future__ import annotations

from typing import Literal

from attrs import field, frozen

from lamina.adapters import ModelOverride, SendSettings


@frozen(kw_only=True)
class AnthropicSettings(SendSettings):
    """``cache`` turns breakpoints on; ``cache_ttl`` is their lifetime (``5m`` or ``1h``);
    ``models`` overrides limits per model name. Sending (``base_url``, ``api_key_env``,
    ``timeout``, ``max_retries``, the ``summarizer`` table) is ``SendSettings``'."""

    cache: bool = True
    cache_ttl: Literal["5m", "1h"] = "5m"
    models: dict[str, ModelOverride] = field(factory=dict)

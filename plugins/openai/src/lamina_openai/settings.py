"""The ``[plugins.openai]`` config section."""

from __future__ import annotations

from typing import Literal

from attrs import field, frozen

from lamina.adapters import ModelOverride, SendSettings

SystemRole = Literal["auto", "system", "developer"]


@frozen(kw_only=True)
class OpenAISettings(SendSettings):
    """``system_role`` ``auto`` uses ``developer`` for reasoning models (o-series, gpt-5) and
    ``system`` otherwise; ``prompt_cache_key`` sends the session label as the cache key.
    Sending (``base_url``, ``api_key_env``, ``timeout``, ``max_retries``, the ``summarizer``
    table) is ``SendSettings``'."""

    system_role: SystemRole = "auto"
    prompt_cache_key: bool = True
    models: dict[str, ModelOverride] = field(factory=dict)

"""What an adapter plugin's config section holds for sending: where to, with which key, how
patiently, and the LLM summarizer it registers (``[plugins.<name>.summarizer]``)."""

from __future__ import annotations

import os

from attrs import field, frozen, validators

from lamina.errors import ConfigError


@frozen(kw_only=True)
class LlmSummarizerSettings:
    """``[plugins.<name>.summarizer]``: compaction summaries written by ``model`` through one
    of the plugin's adapters (``adapter``; default its first), registered as ``name``
    (default ``<name>-llm``). ``instructions`` are added to the compaction prompt every time;
    ``max_tokens`` caps each summary (the caller's limit caps it too)."""

    model: str
    adapter: str | None = None
    name: str | None = None
    instructions: str | None = None
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))


@frozen(kw_only=True)
class SendSettings:
    """The part of an adapter plugin's settings its ``send`` uses: ``base_url`` (default: the
    SDK's, which also reads the SDK's own environment variable), ``api_key_env`` (the
    environment variable holding the key; default: the SDK's own, e.g. ``OPENAI_API_KEY``;
    keys never go in the config file), ``timeout`` (seconds per request), ``max_retries``
    (the SDK's retries of failed requests), and ``summarizer``."""

    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = field(default=300.0, validator=validators.gt(0))
    max_retries: int = field(default=2, validator=validators.ge(0))
    summarizer: LlmSummarizerSettings | None = None

    def api_key(self) -> str | None:
        """The key ``api_key_env`` names; ``None`` leaves it to the SDK's own variable."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"the environment variable {self.api_key_env} is not set", key="api_key_env"
            )
        return value

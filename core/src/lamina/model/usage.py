"""What a provider reports it consumed for one request."""

from __future__ import annotations

from attrs import field, frozen, validators

_nonneg = validators.ge(0)


@frozen(kw_only=True)
class Usage:
    """Provider-reported tokens: input (all of it), the cached part of it, cache writes, output."""

    input_tokens: int = field(default=0, validator=_nonneg)
    cached_input_tokens: int = field(default=0, validator=_nonneg)
    cache_creation_tokens: int = field(default=0, validator=_nonneg)
    output_tokens: int = field(default=0, validator=_nonneg)

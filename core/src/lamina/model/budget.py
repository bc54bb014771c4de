"""The token budget exactly as the Broker design defines it."""

from __future__ import annotations

from attrs import field, frozen, validators

from lamina.model.fields import non_negative as _nonneg


@frozen(kw_only=True)
class BudgetUsage:
    """Tokens used per physical layer."""

    system_prompt: int = field(default=0, validator=_nonneg)
    history: int = field(default=0, validator=_nonneg)
    event: int = field(default=0, validator=_nonneg)
    total: int = field(default=0, validator=_nonneg)

    def __attrs_post_init__(self) -> None:
        if self.total != self.system_prompt + self.history + self.event:
            raise ValueError("BudgetUsage.total must be the sum of its layers")


@frozen(kw_only=True)
class TokenBudget:
    """``available`` = model limit − reserves (lower when the host caps it); ``remaining`` = available − used."""

    model_limit: int = field(validator=validators.gt(0))
    reserve_response: int = field(default=0, validator=_nonneg)
    reserve_tools: int = field(default=0, validator=_nonneg)
    available: int = field(validator=_nonneg)
    used: BudgetUsage = field(factory=BudgetUsage)
    remaining: int = field()

    @remaining.default
    def _remaining(self) -> int:
        return self.available - self.used.total

    def __attrs_post_init__(self) -> None:
        ceiling = self.model_limit - self.reserve_response - self.reserve_tools
        if self.available > ceiling:
            raise ValueError(
                f"available ({self.available}) exceeds model limit − reserves ({ceiling})"
            )
        if self.remaining != self.available - self.used.total:
            raise ValueError("remaining must equal available − used.total")

    def spent(self, used: BudgetUsage) -> TokenBudget:
        """This budget with ``used`` spent (``remaining`` follows)."""
        return TokenBudget(
            model_limit=self.model_limit,
            reserve_response=self.reserve_response,
            reserve_tools=self.reserve_tools,
            available=self.available,
            used=used,
            remaining=self.available - used.total,
        )

    @classmethod
    def plan(
        cls,
        *,
        model_limit: int,
        reserve_response: int = 0,
        reserve_tools: int = 0,
        cap: int | None = None,
    ) -> TokenBudget:
        """A budget with nothing used yet; ``cap`` (``--max-tokens``) lowers what is available."""
        ceiling = model_limit - reserve_response - reserve_tools
        if ceiling <= 0:
            raise ValueError(
                f"reserves ({reserve_response} + {reserve_tools}) leave nothing of the "
                f"model limit {model_limit}"
            )
        available = ceiling if cap is None else min(cap, ceiling)
        return cls(
            model_limit=model_limit,
            reserve_response=reserve_response,
            reserve_tools=reserve_tools,
            available=available,
        )

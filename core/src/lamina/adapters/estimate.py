"""The calibrated estimate: a token count for providers without an offline tokenizer
(Anthropic, Gemini, local models), flagged inexact and calibrated from reported usage."""

from __future__ import annotations

import math
from collections.abc import Sequence

from attrs import define, field, validators

from lamina.model import AssembledContext, Usage
from lamina.tokenizers import LONG_TEXT


@define
class CalibratedEstimate:
    """``len(text) / chars_per_token`` scaled by ``factor``; ``observe`` moves ``factor``
    from reported/estimated input tokens (clamped to 0.5–2).

    Each change of ``factor`` bumps ``revision``, so the kernel forgets the counts it memoized
    with the old one and assembles the next request cold. So that noise in the reports does
    not do that every turn, ``factor`` moves in steps, erring on the side of counting more:
    a report more than a tenth of ``tolerance`` (a share, default 5%) above it raises it to
    that report's ratio at once (counting low is what overflows a context), and it falls to
    the reports' exponential average once that is more than ``tolerance`` below it.
    ``bench/tune_tolerance.py`` measures the trade on sessions the default was not chosen on."""

    chars_per_token: float = field(default=3.5, validator=validators.gt(0))
    label: str = "estimate"
    factor: float = 1.0
    weight: float = field(default=0.5, validator=[validators.gt(0), validators.le(1)])
    tolerance: float = field(default=0.05, validator=[validators.ge(0), validators.lt(1)])
    name: str = field(init=False)
    exact: bool = field(default=False, init=False)
    revision: int = field(default=0, init=False)
    # The exponential average of what the reports say ``factor`` should be.
    _target: float | None = field(default=None, init=False, repr=False)

    @name.default
    def _name(self) -> str:
        return f"{self.label}-{self.chars_per_token:g}cpt"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token * self.factor)

    def boundaries(self, text: str) -> Sequence[int]:
        """Every ``chars_per_token * factor``-th offset (a ``range`` for a long text, as
        ``EstimateTokenizer`` gives)."""
        step = max(1, round(self.chars_per_token * self.factor))
        offsets = range(0, len(text), step)
        return offsets if len(text) >= LONG_TEXT else list(offsets)

    def observe(self, estimated: int, reported: int) -> float:
        """Calibrate from one request: ``estimated`` input tokens (the context's budget total,
        made with the current ``factor``) against the provider's ``reported`` ones; returns
        the factor now in use."""
        if estimated > 0 and reported > 0:
            ratio = reported / estimated * self.factor
            target = self.factor if self._target is None else self._target
            target = min(2.0, max(0.5, (1 - self.weight) * target + self.weight * ratio))
            self._target = target
            if ratio > self.factor * (1 + self.tolerance / 10):  # counting low: up at once
                self.factor = min(2.0, ratio)
                self._target = max(target, self.factor)
                self.revision += 1
            elif target < self.factor * (1 - self.tolerance):  # counting high for a while
                self.factor = target
                self.revision += 1
        return self.factor

    def observe_usage(self, context: AssembledContext, usage: Usage) -> float:
        """``observe`` with the context's estimated total and the parsed usage's input."""
        return self.observe(context.token_budget.used.total, usage.input_tokens)

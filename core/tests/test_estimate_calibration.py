"""The calibrated estimate follows reported usage in steps, erring on the side of counting
more (``CalibratedEstimate.tolerance``): noise in the reports does not change its counts every
turn (each change makes the kernel forget its memoized counts and assemble cold), and a real
change is followed, upwards at once. The noise is a session's: its requests share most of
their text, so what the provider counts against the estimate moves by a few percent at most."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.adapters import CalibratedEstimate


def report(tok: CalibratedEstimate, raw: int, truth: float) -> None:
    """One turn: the kernel estimated ``raw`` tokens at factor 1; the provider counted
    ``truth`` times that."""
    tok.observe(round(raw * tok.factor), round(raw * truth))


@settings(max_examples=40, deadline=None)
@given(
    truth=st.floats(min_value=0.6, max_value=1.8), noise=st.floats(0.0, 0.03), seed=st.integers()
)
def test_noisy_reports_change_the_counts_a_few_times_and_err_high(
    truth: float, noise: float, seed: int
) -> None:
    rng = random.Random(seed)
    tok = CalibratedEstimate()
    for _ in range(300):
        report(tok, rng.randrange(20_000, 60_000), truth * (1 + rng.uniform(-noise, noise)))
    assert tok.revision <= 12  # each turn's noise would have made it 300
    assert truth * 0.97 <= tok.factor <= truth * (1 + noise) * 1.03 + 0.01


def test_a_real_change_is_followed_upwards_at_once_and_downwards_in_steps() -> None:
    tok = CalibratedEstimate()
    for _ in range(20):
        report(tok, 40_000, 1.0)
    assert tok.factor == 1.0 and tok.revision == 0
    for _ in range(8):
        report(tok, 40_000, 1.5)
    assert tok.factor >= 1.49  # under-counting is what overflows a context: followed at once
    for _ in range(30):
        report(tok, 40_000, 0.9)
    assert 0.9 <= tok.factor <= 0.9 * 1.06  # within the tolerance above the truth


def test_one_report_that_counts_low_raises_the_factor_to_it() -> None:
    """The request after a report that the estimate counted low is counted at that report's
    ratio, not at an average still below it (which let requests that followed a denser one
    over the budget: ``bench/tune_tolerance.py``)."""
    tok = CalibratedEstimate()
    for _ in range(10):
        report(tok, 40_000, 1.0)
    report(tok, 40_000, 1.3)
    assert tok.factor == pytest.approx(1.3, rel=1e-4) and tok.revision == 1
    report(tok, 40_000, 1.28)  # a little below: no change (within the tolerance)
    assert tok.factor == pytest.approx(1.3, rel=1e-4) and tok.revision == 1

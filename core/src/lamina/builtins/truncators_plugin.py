"""Built-in plugin: the text truncators and the history fit strategies."""

from __future__ import annotations

from lamina import fitting_strategies, truncation
from lamina.hookspecs import hookimpl
from lamina.records import FitStrategy, Truncator


@hookimpl
def lamina_truncators() -> list[Truncator]:
    """``never``, ``start``, ``middle`` and ``end``."""
    return [
        Truncator(
            name="never",
            truncate=truncation.truncate_never,
            description="Never cut: the block is kept whole or not at all.",
        ),
        Truncator(
            name="start",
            truncate=truncation.truncate_start,
            description="Drop the beginning, keep the end.",
        ),
        Truncator(
            name="middle",
            truncate=truncation.truncate_middle,
            description="Drop the middle, keep the beginning and the end.",
        ),
        Truncator(
            name="end",
            truncate=truncation.truncate_end,
            description="Drop the end, keep the beginning.",
        ),
    ]


@hookimpl
def lamina_fit_strategies() -> list[FitStrategy]:
    """``truncateMiddle`` (the default), ``rollingWindow`` and ``stopAtLimit``."""
    return [
        FitStrategy(
            name="truncateMiddle",
            select=fitting_strategies.truncate_middle,
            marks_gaps=True,
            description="Keep the oldest and newest turns, drop from the middle.",
        ),
        FitStrategy(
            name="rollingWindow",
            select=fitting_strategies.rolling_window,
            marks_gaps=True,
            description="Keep the newest turns that fit, drop the oldest first.",
        ),
        FitStrategy(
            name="stopAtLimit",
            select=fitting_strategies.stop_at_limit,
            marks_gaps=False,
            description="Keep every turn or refuse with a budget error.",
        ),
    ]

"""Counted nouns for messages people read: ``1 block``, ``2 blocks``."""

from __future__ import annotations

__all__ = ["counted", "plural"]


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``noun`` as it reads after ``n``: itself for one, else ``many`` (default: ``noun + "s"``)."""
    return noun if n == 1 else (many or f"{noun}s")


def counted(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and its noun: ``counted(1, "turn")`` is ``"1 turn"``, ``counted(3, "turn")``
    ``"3 turns"``."""
    return f"{n} {plural(n, noun, many)}"

"""pytest fixtures for Lamina: an isolated assembler factory with a fixed clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lamina.pipeline import Assembler
from lamina.testing import make_assembler


@pytest.fixture
def lamina_assembler() -> Iterator[Callable[..., Assembler]]:
    """Build isolated assemblers (``make_assembler`` arguments); all are closed afterwards."""
    made: list[Assembler] = []

    def factory(*args: Any, **kwargs: Any) -> Assembler:
        assembler = make_assembler(*args, **kwargs)
        made.append(assembler)
        return assembler

    yield factory
    for assembler in made:
        assembler.close()

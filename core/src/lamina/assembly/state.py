"""The state of one assembly in flight, handed from phase to phase.

Each phase reads what earlier phases left here and adds its own part, so no helper needs a
long argument list and the order of the phases is the order of the fields.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

from attrs import define, field, frozen

from lamina.call import Overrides
from lamina.model.blocks import Block, Placement
from lamina.model.budget import BudgetUsage, TokenBudget
from lamina.model.messages import Message
from lamina.model.report import BlockStatus
from lamina.model.request import AssemblyRequest, Tool
from lamina.records import Exclusion, LayerSpec, ModelInfo, Tokenizer

if TYPE_CHECKING:
    from lamina.tokens import TokenCounter

Progress = Callable[[str], None]


@frozen(kw_only=True)
class ResolvedModel:
    """A model resolved once: its info, tokenizer and memoizing counter, and who supplied them."""

    info: ModelInfo
    info_plugin: str
    tokenizer: Tokenizer
    tokenizer_plugin: str
    counter: TokenCounter
    revision: list[Any] = field(factory=lambda: [None])


@define(kw_only=True)
class Item:
    """A block on its way through the pipeline, with its measured size and fate."""

    block: Block
    spec: LayerSpec
    placement: Placement
    required: bool
    index: int
    plugin: str
    tokens: int = 0
    original_tokens: int = 0
    status: BlockStatus = "kept"
    strategy: str | None = None
    reason: str | None = None
    synthetic: bool = False
    framing: int = 0

    @property
    def live(self) -> bool:
        return self.status != "dropped"

    @property
    def cost(self) -> int:
        """What keeping the item costs: its tokens plus, for a history message, the
        provider's per-message framing (nothing once it is dropped)."""
        return self.tokens + self.framing if self.live else 0


def order_key(item: Item) -> tuple[int, int]:
    """Where an item sorts in the output: its index, a gap marker before the block after it."""
    return (item.index, 0 if item.synthetic else 1)


@frozen(kw_only=True)
class Formatted:
    """The three physical layers as text and messages, with the stable prefix's hash."""

    system_prompt: str
    history: tuple[Message, ...]
    current: Message
    wrappers: tuple[str, ...]
    after_history: str
    prefix_sha256: str


@define(kw_only=True)
class InFlight:
    """One assembly: planned (request, model, budget, tools), then gathered, placed, measured,
    fitted and formatted, with the warnings and phase timings the report shows."""

    request: AssemblyRequest
    overrides: Overrides
    model: ResolvedModel
    budget: TokenBudget
    now: datetime
    tools: tuple[Tool, ...] = ()
    tool_tokens: int = 0
    warnings: list[str] = field(factory=list)
    exclusions: list[tuple[Exclusion, str]] = field(factory=list)
    gathered: list[tuple[Block, str]] = field(factory=list)
    history_source: str | None = None
    items: list[Item] = field(factory=list)
    markers: list[Item] = field(factory=list)
    fixed: int = 0
    strategy: str = ""
    caps: dict[str, int] = field(factory=dict)
    formatted: Formatted | None = None
    used: BudgetUsage | None = None
    timings: dict[str, float] = field(factory=dict)

    @contextmanager
    def phase(self, name: str, progress: Progress | None = None) -> Iterator[None]:
        """Time one phase in milliseconds (and tell the progress callback it started)."""
        if progress is not None:
            progress(name)
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(1000 * (time.perf_counter() - started), 3)

"""The state of one assembly in flight, handed from phase to phase.

Each phase reads what earlier phases left here and adds its own part, so no helper needs a
long argument list and the order of the phases is the order of the fields.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from attrs import Factory, define, field, frozen

from lamina.call import Overrides
from lamina.model.blocks import Block, Placement
from lamina.model.budget import BudgetUsage, TokenBudget
from lamina.model.messages import Message
from lamina.model.report import BlockStatus
from lamina.model.request import AssemblyRequest, Tool
from lamina.records import Exclusion, LayerSpec, ModelInfo, Tokenizer

if TYPE_CHECKING:
    from lamina.assembly.layout import Bucket
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
    #: Budgets planned for this model, by reserve override and cap (see ``plan``).
    budgets: dict[tuple[int | None, int | None], TokenBudget] = field(factory=dict)
    #: What the tools offered cost, by the ids of the tool objects (kept with them; ``plan``).
    tool_costs: dict[tuple[int, ...], tuple[tuple[Tool, ...], int]] = field(factory=dict)


@define(kw_only=True, eq=False)
class Item:
    """A block on its way through the pipeline, with its measured size and fate.

    Items outlive one assembly (see ``layout``): ``base`` is the block as gathered and
    ``charge`` the framing a kept history message costs; ``reset`` puts back whatever a call
    cut, and the ``memo_*`` slots keep what a pristine item renders to between calls.
    """

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
    charge: int = 0
    base: Block = field(default=Factory(lambda self: self.block, takes_self=True))
    memo_report: Any = None
    memo_message: Any = None
    memo_seal: bytes = b""

    @property
    def live(self) -> bool:
        return self.status != "dropped"

    @property
    def cost(self) -> int:
        """What keeping the item costs: its tokens plus, for a history message, the
        provider's per-message framing (nothing once it is dropped)."""
        return self.tokens + self.framing if self.live else 0

    @property
    def pristine(self) -> bool:
        """Whether the item is as it was gathered and measured (nothing cut this call)."""
        return self.status == "kept" and self.block is self.base

    def drop(self, reason: str, strategy: str | None = None) -> None:
        """Cut the item: it then costs nothing (tokens and framing 0)."""
        self.status = "dropped"
        self.reason = reason
        if strategy is not None:
            self.strategy = strategy
        self.tokens = self.framing = 0

    def reset(self) -> None:
        """Back to as gathered and measured, for the next assembly."""
        self.block = self.base
        self.tokens = self.original_tokens
        self.framing = self.charge
        self.status = "kept"
        self.strategy = self.reason = None


#: An item's tokens and framing, read at C speed: ``total`` sums them over many items.
TOKENS = attrgetter("tokens")
FRAMING = attrgetter("framing")
ORIGINAL = attrgetter("original_tokens")


def total(items: Sequence[Item]) -> int:
    """What keeping ``items`` costs (a dropped item's tokens and framing are 0)."""
    cost: int = sum(map(TOKENS, items)) + sum(map(FRAMING, items))
    return cost


def order_key(item: Item) -> tuple[int, int]:
    """Where an item sorts in the output: its index, a gap marker before the block after it."""
    return (item.index, 0 if item.synthetic else 1)


@define(kw_only=True, eq=False)
class Cut:
    """Items of one layer fitting dropped together: how many, the tokens they held, the first
    and last (in output order). A history cut made on the pristine groups also records them,
    the groups kept, the strategy, whether gaps were marked and each gap (its size, and the
    item whose index its marker takes), so the next call that cuts the same way, or a little
    further on, changes only what differs (see ``cut``)."""

    layer: str
    count: int
    original: int
    first: Item
    last: Item
    #: The dropped items in order (made from ``groups`` and ``keep`` when first asked for).
    items: list[Item] | None = None
    groups: list[list[Item]] | None = None
    keep: tuple[int, ...] = ()
    strategy: str = ""
    marking: bool = False
    gaps: list[tuple[int, Item]] = field(factory=list)
    kept_cost: int = 0
    #: What the strategy was asked (target, protected groups, marker tokens, strategy): the
    #: same question on the same groups gets the same answer.
    asked: tuple[Any, ...] = ()
    markers: list[Item] = field(factory=list)
    #: What the kept history renders to under this cut (its items, markers in place; their
    #: messages, hash input, cost and reports), made once and reused while it holds.
    memo: dict[str, Any] = field(factory=dict)

    @classmethod
    def of(cls, item: Item) -> Cut:
        """One dropped block."""
        return cls(
            layer=item.spec.name,
            count=1,
            original=item.original_tokens,
            first=item,
            last=item,
            items=[item],
        )

    def members(self) -> list[Item]:
        """Every dropped item, in order."""
        if self.items is None:
            kept, groups = set(self.keep), self.groups or []
            self.items = [i for n, g in enumerate(groups) if n not in kept for i in g]
        return self.items


@define(kw_only=True, eq=False)
class Gathered:
    """One provider's blocks, in the order it gave them; ``key`` is the provider's position.
    ``own``: ``blocks`` is gather's copy of them (what the stream's layout can keep as it is);
    ``prior`` the previous call's copy when gather found the blocks start with its blocks
    (``None`` once anything changed ``blocks``)."""

    key: int
    plugin: str
    blocks: Sequence[Block]
    own: bool = False
    prior: Sequence[Block] | None = None

    def replace(self, blocks: Sequence[Block]) -> None:
        """The blocks are now ``blocks`` (gather's copies no longer stand for them)."""
        self.blocks, self.own, self.prior = blocks, False, None


@frozen(kw_only=True)
class Formatted:
    """The three physical layers as text and messages, with the stable prefix's hash."""

    system_prompt: str
    history: Sequence[Message]
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
    gathered: list[Gathered] = field(factory=list)
    history_source: str | None = None
    buckets: list[Bucket] = field(factory=list)
    items: list[Item] = field(factory=list)  # every item in output order: see all_items()
    #: Placed: the items by layer and by placement (output order), the history's buckets
    #: (``None`` when a bucket mixes layers), the items with their own ``max_tokens``, the
    #: history items with tool calls or results, and the items new this call (to measure).
    by_layer: dict[str, list[Item]] = field(factory=dict)
    by_placement: dict[str, list[Item]] = field(factory=dict)
    history_buckets: list[Bucket] | None = None
    capped: list[Item] = field(factory=list)
    tool_items: list[Item] = field(factory=list)
    fresh: list[Item] = field(factory=list)
    #: Fitted: every item changed this call (put back when it ends) and the runs of items
    #: dropped, in the order they were dropped.
    touched: list[Item] = field(factory=list)
    cuts: list[Cut] = field(factory=list)
    markers: list[Item] = field(factory=list)
    #: Formatted: the kept items of each placement in output order, markers in their places.
    live: dict[str, list[Item]] = field(factory=dict)
    #: Whether history is as placed but for one cut on its pristine groups (in ``cuts``).
    history_clean: bool = False
    history_memo: dict[str, Any] | None = None
    verbose: bool = False
    fixed: int = 0
    strategy: str = ""
    caps: dict[str, int] = field(factory=dict)
    formatted: Formatted | None = None
    used: BudgetUsage | None = None
    timings: dict[str, float] = field(factory=dict)

    def all_items(self) -> list[Item]:
        """Every placed item in output order (joined on first use)."""
        if not self.items:
            self.items = [i for bucket in self.buckets for i in bucket.items]
        return self.items

    def phase(self, name: str, progress: Progress | None = None) -> _Phase:
        """Time one phase in milliseconds (and tell the progress callback it started)."""
        if progress is not None:
            progress(name)
        return _Phase(self.timings, name)


class _Phase:
    """A phase's timer (a plain class: a generator-based context manager costs several
    times as much, and six run per assembly)."""

    __slots__ = ("_name", "_started", "_timings")

    def __init__(self, timings: dict[str, float], name: str) -> None:
        self._timings, self._name = timings, name
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.perf_counter()

    def __exit__(self, *_: object) -> None:
        self._timings[self._name] = milliseconds(time.perf_counter() - self._started)


def milliseconds(seconds: float) -> float:
    """``seconds`` (not negative) in milliseconds, to the microsecond. Not ``round(x, 3)``:
    that rounds through decimal digits (C's dtoa, printf and strtod), code a request runs
    nowhere else, so a request after a collection fetched it from memory."""
    return int(seconds * 1_000_000 + 0.5) / 1000

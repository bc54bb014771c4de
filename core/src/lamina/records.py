"""The records plugins hand the kernel, and the small protocols they are written against.

Collection hooks return these; the kernel resolves them once per ``Assembler``, attributes
each to the plugin that supplied it and rejects two records of one kind with one name.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from attrs import field, frozen, validators

from lamina.model.blocks import PLACEMENTS, Block, Placement
from lamina.model.budget import TokenBudget
from lamina.model.context import AssembledContext
from lamina.model.request import AssemblyRequest, Tool
from lamina.model.result import AgentResult
from lamina.model.usage import Usage

if TYPE_CHECKING:
    from lamina.config import LaminaConfig


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens for one encoding and says where each token starts.

    ``boundaries(text)`` gives the character offset at which each token begins (so its length
    is ``count(text)``); truncators cut there, so a cut never splits a character.

    Counts are memoized by content. A tokenizer whose counts can change (an estimate
    calibrated from reported usage) exposes an integer ``revision`` and bumps it when they
    do; the assembler then forgets what it memoized.
    """

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def count(self, text: str) -> int: ...

    def boundaries(self, text: str) -> Sequence[int]: ...


@frozen(kw_only=True)
class LayerSpec:
    """A conceptual layer: where its blocks go, in what order, when they are cut, and whether
    they are required by default (never cut)."""

    name: str
    placement: Placement = field(validator=validators.in_(PLACEMENTS))
    order: int
    cut_rank: int
    required: bool = False
    format: str | None = None
    description: str = ""


@frozen(kw_only=True)
class Exclusion:
    """Something a provider considered and left out (a refused file, say), for the report."""

    id: str
    layer: str
    reason: str
    path: str | None = None


@frozen(kw_only=True)
class LayerView:
    """How the kernel places, renders and caps one layer in this assembly, so a plugin that
    must predict the result (memory sizing its sections, say) uses the kernel's rules."""

    name: str
    placement: Placement
    formatter: Formatter
    cap: int | None = None


@frozen(kw_only=True)
class ProviderContext:
    """What a layer provider sees for one request.

    ``warn`` and ``exclude`` put things in the report without failing the assembly: a
    degraded source, a file refused for safety. ``layer(name)`` is the effective placement,
    formatter and cap of a layer.
    """

    request: AssemblyRequest
    config: LaminaConfig
    settings: Any
    budget: TokenBudget
    tokenizer: Tokenizer
    now: datetime
    plugin: str
    warnings: list[str] = field(factory=list)
    exclusions: list[Exclusion] = field(factory=list)
    layers: Mapping[str, LayerView] = field(factory=dict)

    def layer(self, name: str) -> LayerView:
        """The effective placement, formatter and cap of layer ``name`` for this request."""
        try:
            return self.layers[name]
        except KeyError:
            known = ", ".join(sorted(self.layers))
            raise KeyError(f"unknown layer {name!r}; known: {known}") from None

    def warn(self, message: str) -> None:
        """Add a warning (prefixed with this plugin's name) to the report."""
        self.warnings.append(f"plugin {self.plugin!r}: {message}")

    def exclude(self, *, id: str, layer: str, reason: str, path: str | None = None) -> None:
        """Report something left out before it became a block."""
        self.exclusions.append(Exclusion(id=id, layer=layer, reason=reason, path=path))


@frozen(kw_only=True)
class LayerProvider:
    """Yields the blocks of one or more layers for a request.

    A ``required`` provider that raises or runs past ``timeout`` seconds fails the assembly;
    an optional one is dropped with a warning in the report. An ``inline`` provider only
    computes from what it is given (no I/O, nothing that can block): it runs on the
    assembling thread, which saves a thread hop per assembly, and has no timeout.

    ``from_memory``, when given, is asked first, on the assembling thread: the blocks when it
    has them in memory (no I/O, nothing that can block), else ``None``, and then ``provide``
    runs on the pool as usual, within its time limit. A provider that reads a database can
    so answer a request whose data it already holds without the thread hop.
    """

    name: str
    provide: Callable[[ProviderContext], Iterable[Block]]
    layers: tuple[str, ...] = ()
    required: bool = False
    timeout: float | None = None
    description: str = ""
    inline: bool = False
    from_memory: Callable[[ProviderContext], Iterable[Block] | None] | None = None


@frozen(kw_only=True)
class Truncator:
    """A named way to shorten one block's text to at most ``max_tokens`` tokens.

    ``truncate(text, max_tokens, tokenizer)`` returns the shortened text (marker included) or
    ``None`` when the text cannot be cut that way (``never``) or nothing useful would remain.
    """

    name: str
    truncate: Callable[[str, int, Tokenizer], str | None]
    description: str = ""


@frozen(kw_only=True)
class HistoryCut:
    """Which history groups a fit strategy keeps (indices, oldest first)."""

    keep: tuple[int, ...]


@frozen(kw_only=True)
class FitStrategy:
    """A named way to shrink the history: which groups (turns) to keep within a budget.

    ``select(sizes, budget, protected, marker_tokens)`` gets each group's tokens oldest first,
    the tokens the history may use, how many of the newest groups must stay, and what one
    gap marker costs; it returns the groups to keep (the kernel puts a marker in each gap when
    ``marks_gaps``), or raises ``BudgetError`` to refuse. It must depend on its arguments
    only: asked the same about the same history, the kernel reuses its last answer.
    """

    name: str
    select: Callable[[Sequence[int], int, int, int], HistoryCut]
    marks_gaps: bool = True
    description: str = ""


@frozen(kw_only=True)
class Formatter:
    """Renders one text block into a string; untrusted content is escaped so it cannot close
    or forge the surrounding structure. Rendered blocks are joined with ``separator``."""

    name: str
    render: Callable[[Block], str]
    separator: str = "\n\n"
    description: str = ""


@frozen(kw_only=True)
class ModelInfo:
    """What the kernel must know of a model to budget for it.

    ``tool_tokens(tools, tokenizer)`` is how the provider counts tool definitions in the
    prompt; without it the kernel counts each tool's JSON (name, description, schema).
    """

    name: str
    context_window: int = field(validator=validators.gt(0))
    max_output: int | None = None
    min_cache_prefix: int = 0
    provider: str | None = None
    encoding: str | None = None
    message_overhead: int = 0
    reply_overhead: int = 0
    assumed: bool = False
    tool_tokens: Callable[[Sequence[Tool], Tokenizer], int] | None = None


@frozen(kw_only=True)
class Summarizer:
    """Condenses blocks into at most ``max_tokens`` tokens of text (for compaction).

    ``summarize(blocks, max_tokens, tokenizer)`` may also take an ``instructions`` keyword:
    what the caller wants the summary to keep. ``run`` passes them only to one that takes
    them. A block whose ``provenance.metadata["summary"]`` is a string is an earlier summary
    to fold in.
    """

    name: str
    summarize: Callable[[Sequence[Block], int, Tokenizer], str]
    description: str = ""

    @property
    def takes_instructions(self) -> bool:
        """Whether ``summarize`` accepts an ``instructions`` keyword."""
        try:
            params = inspect.signature(self.summarize).parameters.values()
        except (TypeError, ValueError):
            return False
        return any(p.name == "instructions" or p.kind is p.VAR_KEYWORD for p in params)

    def run(
        self,
        blocks: Sequence[Block],
        max_tokens: int,
        tokenizer: Tokenizer,
        *,
        instructions: str | None = None,
    ) -> str:
        """``summarize``, with ``instructions`` when given and taken (else without them)."""
        if instructions is not None and self.takes_instructions:
            summarize: Callable[..., str] = self.summarize
            return summarize(blocks, max_tokens, tokenizer, instructions=instructions)
        return self.summarize(blocks, max_tokens, tokenizer)


@frozen(kw_only=True)
class ToolFilter:
    """Decides whether the caller may have a tool; a tool is offered only if every filter allows."""

    name: str
    allows: Callable[[Tool, AssemblyRequest], bool]
    description: str = ""


def _never_overflow(_error: object) -> bool:
    return False


@frozen(kw_only=True)
class Adapter:
    """Turns an ``AssembledContext`` into one provider's request, and reads its usage back.

    ``build_request(context, options)`` returns the request body as plain JSON data;
    ``parse_usage(response)`` reads the provider's usage (a response object or its JSON);
    ``is_context_overflow(error)`` says whether an error (exception or error JSON) means the
    context was too long, which sends the host down the reactive-compaction path.
    ``native_system`` is false for providers with no system field (it then goes first in the
    messages).

    ``send(context, options)``, when the adapter can send, posts ``build_request(context,
    options)`` to the provider and returns its reply as an ``AgentResult`` (the assistant
    message, the usage with cached tokens, the stop reason); ``asend`` is the same for
    asyncio. Both are optional: ``None`` means the host sends the payload itself.
    """

    name: str
    build_request: Callable[[AssembledContext, Mapping[str, Any]], dict[str, Any]]
    parse_usage: Callable[[Any], Usage]
    is_context_overflow: Callable[[Any], bool] = _never_overflow
    native_system: bool = True
    description: str = ""
    send: Callable[[AssembledContext, Mapping[str, Any]], AgentResult] | None = None
    asend: Callable[[AssembledContext, Mapping[str, Any]], Awaitable[AgentResult]] | None = None


@frozen(kw_only=True)
class BlockTransform:
    """Rewrites blocks after they are gathered and before they are measured, e.g. to mask
    secrets everywhere (history included) so what is counted is what is sent.

    ``transform(block, ctx)`` returns the block, changed or not; ``ctx`` is a
    ``ProviderContext`` for the transform's plugin (``ctx.warn`` reaches the report).
    Transforms run in plugin registration order.
    """

    name: str
    transform: Callable[[Block, ProviderContext], Block]
    description: str = ""


# -- session stores (what ``lamina serve`` keeps sessions in) ------------------------------


@frozen(kw_only=True)
class CompactionRequest:
    """A compaction a host asks for: until the session's next request would use at most
    ``target`` of the available tokens (``None``: the store's default); ``instructions`` say
    what the summary should keep, for summarizers that take them."""

    trigger: Literal["manual", "context_limit", "overflow_recovery"] = "manual"
    target: float | None = field(
        default=None, validator=validators.optional([validators.gt(0), validators.lt(1)])
    )
    instructions: str | None = None


@frozen(kw_only=True)
class CompactionOutcome:
    """What a compaction did; ``compacted`` is false when there was nothing to summarize."""

    session_label: str
    compacted: bool
    trigger: str
    turn_id: str | None = None
    summarized_turns: int = 0
    kept_turns: int = 0
    tokens_before: int | None = None
    tokens_after: int | None = None
    warnings: tuple[str, ...] = ()


@frozen(kw_only=True)
class SessionStats:
    """Totals over a session: its turns and compactions and the tokens the provider reported,
    so a host sees whether the prompt cache is hitting (``cache_hit_ratio``: cached input over
    all input, ``None`` before any usage was recorded). ``details`` holds the store's extras."""

    session_label: str
    turns: int
    compactions: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_tokens: int = 0
    output_tokens: int = 0
    turns_with_usage: int = 0
    cache_hit_ratio: float | None = None
    details: dict[str, Any] = field(factory=dict)


@frozen(kw_only=True)
class SessionStore:
    """Where a long-running host (``lamina serve``) keeps sessions between requests.

    Each callable takes the ``Assembler`` first (typed ``Any`` so this contract does not
    import the engine): ``assemble(assembler, request)`` assembles a turn of a stored session
    (compacting first when it would not fit); ``record(assembler, label, result)`` appends a
    finished ``AgentResult`` and returns the new turn's id; ``compact(assembler, request,
    compaction)`` compacts now; ``stats(assembler, label)`` totals the session.
    ``aassemble`` is an async ``assemble`` for asyncio hosts (without it they run ``assemble``
    on a worker thread); ``close(assembler)`` releases what the store opened for that
    assembler. ``turn_stats(assembler, label)`` (optional) gives the statistics turn by turn
    as JSON-ready data and ``stats_page(assembler, label)`` (optional) as one self-contained
    HTML page. A session the store does not know raises ``LookupError``.
    """

    name: str
    assemble: Callable[[Any, AssemblyRequest], AssembledContext]
    aassemble: Callable[[Any, AssemblyRequest], Awaitable[AssembledContext]] | None = None
    record: Callable[[Any, str, AgentResult], str]
    compact: Callable[[Any, AssemblyRequest, CompactionRequest], CompactionOutcome]
    stats: Callable[[Any, str], SessionStats]
    close: Callable[[Any], None] | None = None
    description: str = ""
    turn_stats: Callable[[Any, str], Mapping[str, Any]] | None = None
    stats_page: Callable[[Any, str], str] | None = None

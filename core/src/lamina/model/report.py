"""The assembly report: what was kept, cut, summarized or dropped, and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from attrs import field, frozen

BlockStatus = Literal["kept", "truncated", "summarized", "dropped"]


@frozen(kw_only=True)
class BlockReport:
    """The fate of one block. ``source_id`` and ``details`` are the block's provenance (its
    metadata less ``context_json``): e.g. the memory items a section holds, with their scores."""

    id: str
    layer: str
    placement: str
    plugin: str
    status: BlockStatus
    tokens: int
    original_tokens: int
    path: str | None = None
    strategy: str | None = None
    reason: str | None = None
    hash: str = ""
    source_id: str | None = None
    details: dict[str, Any] = field(factory=dict)


@frozen(kw_only=True)
class LayerReport:
    """Totals for one conceptual layer."""

    layer: str
    placement: str
    blocks: int
    kept: int
    tokens: int
    original_tokens: int
    cap: int | None = None


@frozen(kw_only=True)
class DroppedReport:
    """The blocks of one layer that fitting dropped, in aggregate: how many, the tokens they
    held, the first and last (in output order) and why. A verbose report also lists each one
    in ``AssemblyReport.blocks``."""

    layer: str
    placement: str
    blocks: int
    original_tokens: int
    first_id: str
    last_id: str
    reasons: tuple[str, ...] = ()


@frozen(kw_only=True)
class TokenizerReport:
    """Which tokenizer counted, and whether its counts are exact or an estimate."""

    name: str
    plugin: str
    exact: bool


@frozen(kw_only=True)
class StablePrefix:
    """The part of the request that repeats turn after turn (system + history): its size and hash.

    ``sha256`` covers the tool definitions sent with it; ``tools_sha256`` is theirs alone (the
    sha256 of their JSON list, every field, keys sorted), ``None`` without tools."""

    tokens: int
    sha256: str
    tools_sha256: str | None = None


@frozen(kw_only=True)
class AssemblyReport:
    """Everything a host needs to see why the context looks the way it does.

    ``blocks`` lists every block that made it in (gap markers included) and every block a
    provider left out; blocks that fitting dropped are summed up per layer in ``dropped``, and
    listed in ``blocks`` too only when the report is ``verbose`` (``[report] verbose`` or
    ``assemble(..., verbose_report=True)``). All fields are deterministic for the same inputs
    except ``timings_ms``. ``blocks`` is immutable: a tuple, or a ``Chunked`` sharing the kept
    history's reports with the session's next report.
    """

    blocks: Sequence[BlockReport] = ()
    layers: tuple[LayerReport, ...] = ()
    dropped: tuple[DroppedReport, ...] = ()
    verbose: bool = False
    warnings: tuple[str, ...] = ()
    tokenizer: TokenizerReport | None = None
    stable_prefix: StablePrefix | None = None
    strategy: str = ""
    #: Where the history came from: ``"request"`` (the host's own list) or the plugin(s)
    #: that supplied it (``"ledger"``); ``None`` when there was none.
    history_source: str | None = None
    timings_ms: dict[str, float] = field(factory=dict)

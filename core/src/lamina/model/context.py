"""``AssembledContext``: the contract between assembly and the agent engine (the Broker design)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from lamina.model.budget import TokenBudget
from lamina.model.messages import Message
from lamina.model.report import AssemblyReport
from lamina.model.request import AgentRole, ModelConfig, Tool

if TYPE_CHECKING:
    from lamina.records import ModelInfo


@frozen(kw_only=True)
class AssembledContext:
    """The three physical layers plus everything the engine and the ledger write need.

    ``system_context_json`` is the provenance of the system prompt (the Broker design's ``context_json``
    for the system message): the system blocks' ``provenance.metadata["context_json"]`` merged.

    ``history`` is immutable: a tuple, or a ``Chunked`` whose chunks the next context of the
    same session shares (equal to the tuple of the same messages; a slice of it is a tuple).
    """

    system_prompt: str
    history: Sequence[Message]
    current_message: Message
    tools: tuple[Tool, ...]
    model: str
    provider: str
    model_config: ModelConfig
    token_budget: TokenBudget
    session_label: str
    role: AgentRole
    workspace_path: str
    parent_turn_id: str | None = None
    toolset_name: str | None = None
    permissions_granted: tuple[str, ...] = ()
    source_event_id: str | None = None
    system_context_json: dict[str, Any] = field(factory=dict)
    report: AssemblyReport = field(factory=AssemblyReport)
    #: What the kernel knew of the model when it planned the budget (context window, cache
    #: minimum, overheads), so adapters need not look it up again. Not part of the JSON.
    model_info: ModelInfo | None = field(default=None, eq=False, repr=False)

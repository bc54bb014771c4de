"""``AssembledContext``: the contract between assembly and the agent engine (seed 000)."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

from lamina.model.budget import TokenBudget
from lamina.model.messages import Message
from lamina.model.report import AssemblyReport
from lamina.model.request import AgentRole, ModelConfig, Tool


@frozen(kw_only=True)
class AssembledContext:
    """The three physical layers plus everything the engine and the ledger write need.

    ``system_context_json`` is the provenance of the system prompt (seed 000's ``context_json``
    for the system message): the system blocks' ``provenance.metadata["context_json"]`` merged.
    """

    system_prompt: str
    history: tuple[Message, ...]
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

"""What a host asks for: the event that triggered this turn and who is asking."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from attrs import field, frozen, validators

from lamina.model.messages import Message, Part
from lamina.model.text import clean, clean_data

AgentRole = Literal["manager", "worker", "unified"]
AGENT_ROLES: tuple[AgentRole, ...] = ("manager", "worker", "unified")


@frozen(kw_only=True)
class Event:
    """The current event (the Broker design's NexusEvent): its content and the dynamic context
    around it."""

    content: str = field(converter=clean)
    id: str | None = None
    time: datetime | None = None
    timezone: str = "UTC"
    channel: str | None = None
    platform: str | None = None
    platform_actions: tuple[str, ...] = ()
    hook_data: dict[str, Any] = field(factory=dict, converter=clean_data)
    attachments: tuple[Part, ...] = ()
    source: str | None = None


@frozen(kw_only=True)
class Tool:
    """A tool the agent may call; ``permission`` names what the caller must hold to get it."""

    name: str = field(converter=clean)
    description: str = field(default="", converter=clean)
    input_schema: dict[str, Any] = field(
        factory=lambda: {"type": "object", "properties": {}}, converter=clean_data
    )
    permission: str | None = None


@frozen(kw_only=True)
class ModelConfig:
    """Sampling settings handed through to the engine (the Broker design's ``modelConfig``)."""

    temperature: float | None = None
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))
    thinking: dict[str, Any] | None = None
    extra: dict[str, Any] = field(factory=dict)


@frozen(kw_only=True)
class AssemblyRequest:
    """One turn to assemble: the session, the event, the caller's role and permissions, the model."""

    session_label: str
    event: Event
    model: str
    role: AgentRole = "unified"
    provider: str | None = None
    permissions: tuple[str, ...] = ()
    tools: tuple[Tool, ...] = ()
    toolset_name: str | None = None
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))
    parent_turn_id: str | None = None
    workspace_path: str = "."
    model_config: ModelConfig = field(factory=ModelConfig)
    task: str | None = None
    metadata: dict[str, Any] = field(factory=dict)
    #: The conversation so far as the host keeps it (oldest first, tool calls with their
    #: results); ``None`` when history comes from a plugin such as the ledger.
    history: tuple[Message, ...] | None = None

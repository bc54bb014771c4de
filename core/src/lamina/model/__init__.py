"""Lamina's data model: frozen attrs classes, converted to and from JSON by ``lamina.serde``."""

from lamina.model.blocks import (
    EVENT,
    MEMORY,
    PERSONA,
    PLACEMENTS,
    SESSION,
    WORKSPACE,
    Block,
    Placement,
    Provenance,
    content_hash,
)
from lamina.model.budget import BudgetUsage, TokenBudget
from lamina.model.chunked import Chunked
from lamina.model.context import AssembledContext
from lamina.model.event_context import attachment_record, event_context
from lamina.model.messages import (
    ImagePart,
    Message,
    MessageRole,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    part_text,
)
from lamina.model.report import (
    AssemblyReport,
    BlockReport,
    BlockStatus,
    DroppedReport,
    LayerReport,
    StablePrefix,
    TokenizerReport,
)
from lamina.model.request import (
    AGENT_ROLES,
    AgentRole,
    AssemblyRequest,
    Event,
    ModelConfig,
    Tool,
)
from lamina.model.result import AgentResult
from lamina.model.usage import Usage

__all__ = [
    "AGENT_ROLES",
    "EVENT",
    "MEMORY",
    "PERSONA",
    "PLACEMENTS",
    "SESSION",
    "WORKSPACE",
    "AgentResult",
    "AgentRole",
    "AssembledContext",
    "AssemblyReport",
    "AssemblyRequest",
    "Block",
    "BlockReport",
    "BlockStatus",
    "BudgetUsage",
    "Chunked",
    "DroppedReport",
    "Event",
    "ImagePart",
    "LayerReport",
    "Message",
    "MessageRole",
    "ModelConfig",
    "Part",
    "Placement",
    "Provenance",
    "StablePrefix",
    "TextPart",
    "TokenBudget",
    "TokenizerReport",
    "Tool",
    "ToolCallPart",
    "ToolResultPart",
    "Usage",
    "attachment_record",
    "content_hash",
    "event_context",
    "part_text",
]

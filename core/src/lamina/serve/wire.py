"""The service's own wire types (besides the data model's ``AssembledContext``,
``AgentResult`` and the session-store records): what ``POST /v1/assemble`` takes and the small
replies. Plain attrs classes, read and written by ``lamina.serde`` like the rest of the model."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from attrs import evolve, field, frozen, validators

from lamina.errors import ConfigError
from lamina.model.messages import Message
from lamina.model.request import AgentRole, AssemblyRequest, Event, ModelConfig, Tool

if TYPE_CHECKING:
    from lamina.assembly.engine import Assembler

#: What a session label may look like: letters, digits, ``.``, ``_`` and ``-``, starting with a
#: letter or digit, at most 128 characters. No separators, so a label never names a path.
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_label(label: str, *, key: str = "session_label") -> str:
    """``label`` when it is a safe session label, else a ``ConfigError`` naming ``key``."""
    if not LABEL.fullmatch(label) or ".." in label:
        raise ConfigError(
            f"invalid session label {label[:140]!r}: use 1-128 letters, digits, '.', '_' or "
            "'-', starting with a letter or digit (no '..')",
            key=key,
        )
    return label


@frozen(kw_only=True)
class AssemblyInput:
    """An assembly request as the service takes it: ``message`` (the event's text) or a whole
    ``event``, and whatever differs from the service's config (session, model, role,
    permissions, tools, history, …). The workspace is the config's; a request cannot choose
    another directory."""

    message: str | None = None
    event: Event | None = None
    session_label: str | None = None
    model: str | None = None
    role: AgentRole | None = None
    provider: str | None = None
    permissions: tuple[str, ...] | None = None
    tools: tuple[Tool, ...] = ()
    toolset_name: str | None = None
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))
    parent_turn_id: str | None = None
    model_config: ModelConfig | None = None
    task: str | None = None
    metadata: dict[str, Any] = field(factory=dict)
    #: The conversation so far as the host keeps it (oldest first, tool calls with their
    #: results). Leave it out to use the stored session (the ledger).
    history: tuple[Message, ...] | None = None

    def to_request(self, assembler: Assembler) -> AssemblyRequest:
        """The kernel's request: this input over the config's defaults."""
        if (self.message is None) == (self.event is None):
            raise ConfigError("give exactly one of message or event", key="message")
        if self.session_label is not None:
            check_label(self.session_label)
        fields = {
            name: value
            for name in _PASSED
            if (value := getattr(self, name)) is not None and value != ()
        }
        if self.event is None:
            assert self.message is not None
            return assembler.request(self.message, **fields)
        return evolve(assembler.request(self.event.content, **fields), event=self.event)


_PASSED = (
    "session_label",
    "model",
    "role",
    "provider",
    "permissions",
    "tools",
    "toolset_name",
    "max_tokens",
    "parent_turn_id",
    "model_config",
    "task",
    "metadata",
    "history",
)


@frozen(kw_only=True)
class CompactionInput:
    """What ``POST /v1/sessions/{label}/compact`` takes: the trigger, the share of the
    available tokens to compact to (``target``; default: the store's), instructions for the
    summary, and the model whose budget counts (default: the config's)."""

    trigger: Literal["manual", "context_limit", "overflow_recovery"] = "manual"
    target: float | None = field(
        default=None, validator=validators.optional([validators.gt(0), validators.lt(1)])
    )
    instructions: str | None = None
    model: str | None = None
    max_tokens: int | None = field(default=None, validator=validators.optional(validators.gt(0)))


@frozen(kw_only=True)
class TurnRecorded:
    """The reply to ``POST /v1/sessions/{label}/turns``: the new turn's id."""

    session_label: str
    turn_id: str


@frozen(kw_only=True)
class Health:
    """The reply to ``GET /v1/health``."""

    status: str
    version: str
    model: str
    store: str | None = None


@frozen(kw_only=True)
class Problem:
    """Every error reply (``application/problem+json``, RFC 9457), with the kernel's fields
    when they apply: the config ``key`` and ``file``, the ``plugin`` that failed, the budget
    ``overage`` and ``available`` tokens, and each problem of a malformed body (``errors``)."""

    type: str
    title: str
    status: int
    detail: str
    key: str | None = None
    file: str | None = None
    plugin: str | None = None
    overage: int | None = None
    available: int | None = None
    errors: tuple[str, ...] | None = None

"""``[plugins.workspace]``: where the workspace, persona and working-set files are."""

from __future__ import annotations

import re

from attrs import Attribute, field, frozen, validators

from lamina import inert_without_section

#: The plugin's name: its entry point and its config section ``[plugins.workspace]``.
NAME = "workspace"
#: The sources a workspace may hold; ``required`` names those that must exist.
SOURCES = ("agents", "user_identity", "soul", "identity", "permissions")
_PERSONA_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _sources(_inst: object, _attr: object, value: tuple[str, ...]) -> None:
    unknown = [v for v in value if v not in SOURCES]
    if unknown:
        raise ValueError(f"unknown sources {unknown}; known: {', '.join(SOURCES)}")


def valid_persona_id(value: str) -> bool:
    """A persona id is a plain folder name (letters, digits, ``_ . -``; no slashes)."""
    return _PERSONA_ID.fullmatch(value) is not None and value not in (".", "..")


def _persona(_inst: object, _attr: object, value: str) -> None:
    if not valid_persona_id(value):
        raise ValueError(f"persona must be a plain folder name, got {value!r}")


@frozen(kw_only=True)
class BootSettings:
    """The working-set protocol's boot header (printed first when a working set is configured)."""

    enabled: bool = True
    constitution: str | None = None
    constitution_version: str | None = None
    session_dir: str | None = None
    output_sink: str | None = None
    cache_hints: tuple[str, ...] = ()
    tool_contract: str | None = "All calls require `why`"


def _unit(_inst: object, attr: Attribute[float], value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attr.name} must be within 0.0..1.0, got {value!r}")


@frozen(kw_only=True)
class OrchestratorSettings:
    """The working-set protocol's orchestrator-initiated updates, run once per turn from the
    assembly: new files under ``tool_outputs`` added (all but the ``keep_tool_outputs``
    newest aged out), files the event or the last reply names bumped, files unused for
    ``demote_after_turns`` turns demoted."""

    enabled: bool = False
    tool_outputs: str | None = "tool"
    tool_output_priority: float = field(default=0.3, validator=_unit)
    keep_tool_outputs: int = field(default=3, validator=validators.ge(0))
    bump_by: float = field(default=0.1, validator=_unit)
    bump_ceiling: float = field(default=1.0, validator=_unit)
    demote_after_turns: int = field(default=5, validator=validators.ge(0))
    demote_by: float = field(default=0.1, validator=_unit)
    demote_floor: float = field(default=0.1, validator=_unit)
    state: str = ".lamina/working-set.state.json"


@inert_without_section
@frozen(kw_only=True)
class Settings:
    """Every path is relative to ``root``, which is relative to the config file. Without its
    section the plugin is inert (no providers, no assembly wrapper)."""

    root: str = "."
    agents: str = "AGENTS.md"
    user_identity: str = "IDENTITY.md"
    personas: str = "personas"
    persona: str = field(default="default", validator=_persona)
    soul: str = "SOUL.md"
    identity: str = "IDENTITY.md"
    permissions: str = "PERMISSIONS.md"
    required: tuple[str, ...] = field(default=("agents", "soul"), validator=_sources)
    version: int | None = None
    runtime: bool = True
    host: str | None = None
    os: str | None = None
    arch: str | None = None
    manager_rules: str | None = None
    worker_rules: str | None = None
    max_source_bytes: int = field(default=256 * 1024, validator=validators.gt(0))
    working_set: str | None = None
    change_log: str = ".lamina/working-set.log.jsonl"
    max_read_bytes: int = field(default=1024 * 1024, validator=validators.gt(0))
    bytes_per_token: int = field(default=8, validator=validators.gt(0))
    boot: BootSettings = field(factory=BootSettings)
    tools: bool = False
    orchestrator: OrchestratorSettings = field(factory=OrchestratorSettings)

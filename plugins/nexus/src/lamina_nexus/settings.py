"""``[plugins.nexus]``: where the snapshot comes from and how it is rendered."""

from __future__ import annotations

from typing import Literal

from attrs import field, frozen, validators

from lamina import inert_without_section

#: The plugin's name: its entry point and its config section ``[plugins.nexus]``.
NAME = "nexus"


@inert_without_section
@frozen(kw_only=True)
class Settings:
    """``[plugins.nexus]``: where the snapshot comes from and how it is rendered."""

    snapshot: str | None = None
    command: tuple[str, ...] = ()
    timeout: float = field(default=5.0, validator=validators.gt(0))
    cli: str = "nexus"
    skill_command: str = "nexus skill use <name>"
    worker_scope: Literal["task", "all"] = field(
        default="task", validator=validators.in_(("task", "all"))
    )
    title: str = "Nexus Environment"

    def __attrs_post_init__(self) -> None:
        if self.snapshot is not None and self.command:
            raise ValueError("give snapshot or command, not both")

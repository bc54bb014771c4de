"""``[plugins.loom]`` settings and the per-request selection (``metadata["loom"]``)."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen, validators

from lamina import AssemblyRequest, SerdeError, structure
from lamina_loom.errors import LoomError
from lamina_loom.model import DEFAULT_PREFERENCES, Preferences


@frozen(kw_only=True)
class Settings:
    """``[plugins.loom]``. Without ``store`` (or a request naming a tree) the plugin is inert."""

    store: str | None = None
    tree: str | None = None
    node: str | None = None
    agent_system_prompt: str = ""
    truncation_strategy: str | None = None
    minimum_recent_nodes: int | None = field(
        default=None, validator=validators.optional(validators.ge(0))
    )
    token_buffer: int | None = field(default=None, validator=validators.optional(validators.ge(0)))
    merge_separator: str = "\n\n"
    buffer_separator: str = ""
    buffer_system_separator: str = "\n\n"
    buffer_marker_middle: str = "\n[… truncated …]\n"
    buffer_marker_start: str = "[truncated …]\n"
    node_metadata: bool = False
    loom_context: bool = False
    operational_memory: bool = False
    #: The loom-aware addendum to the system prompt; unset: on when any extension above is.
    addendum: bool | None = None
    #: Replaces the built-in addendum text (which describes the extensions that are on).
    addendum_text: str | None = None

    @property
    def addendum_on(self) -> bool:
        """Whether the system context ends its static part with the loom-aware addendum."""
        if self.addendum is not None:
            return self.addendum
        return self.node_metadata or self.loom_context or self.operational_memory

    @property
    def preferences(self) -> Preferences:
        """The app-level preferences set here (unset ones are ``None``)."""
        return Preferences(
            truncation_strategy=self.truncation_strategy,
            minimum_recent_nodes=self.minimum_recent_nodes,
            token_buffer=self.token_buffer,
        )


@frozen(kw_only=True)
class Stash:
    """A recalled stash: a name and its content."""

    name: str
    content: str


@frozen(kw_only=True)
class OperationalMemory:
    """The loom-aware agent's working memory: pinned content, recalled stashes, action trace."""

    pinned: tuple[str, ...] = ()
    stashes: tuple[Stash, ...] = ()
    trace: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pinned or self.stashes or self.trace)


@frozen(kw_only=True)
class LoomRequest:
    """``AssemblyRequest.metadata["loom"]``: which tree and node, nodes to include despite
    the annotation rule, the agent-level system prompt, operational memory, working buffer."""

    tree: str | None = None
    node: str | None = None
    include: tuple[str, ...] = ()
    agent_system: str | None = None
    memory: OperationalMemory | None = None
    working_buffer: str = ""


def request_selection(request: AssemblyRequest) -> LoomRequest | None:
    """The request's ``metadata["loom"]`` validated (``None`` when it has none)."""
    raw: Any = request.metadata.get("loom")
    if raw is None:
        return None
    try:
        return structure(raw, LoomRequest, what='request metadata["loom"]')
    except SerdeError as exc:
        raise LoomError(str(exc), key='metadata["loom"]') from exc


def app_preferences(settings: Settings, given: Preferences | None = None) -> Preferences:
    """App-level preferences: ``given`` (the host's), then ``[plugins.loom]``, then the Loom
    design's defaults."""
    base = settings.preferences.over(DEFAULT_PREFERENCES)
    return base if given is None else given.over(base)

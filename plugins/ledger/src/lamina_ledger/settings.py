"""``[plugins.ledger]``: where the ledger lives and how history is compacted."""

from __future__ import annotations

from typing import Any

from attrs import Attribute, field, frozen, validators

from lamina import LaminaConfig, inert_without_section
from lamina_ledger.db import is_postgres
from lamina_ledger.summarizer import NAME as DEFAULT_SUMMARIZER


def _fraction(_inst: object, attr: Attribute[float], value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{attr.name} must be between 0 and 1 (exclusive), got {value!r}")


def _share(_inst: object, attr: Attribute[float | None], value: float | None) -> None:
    if value is not None and not 0.0 < value <= 1.0:
        raise ValueError(f"{attr.name} must be > 0 and <= 1, got {value!r}")


@inert_without_section
@frozen(kw_only=True)
class LedgerSettings:
    """The plugin's config section. Without the section, or without ``database``, the plugin
    is inert (the kernel skips its provider when the section is missing)."""

    #: An SQLite file (relative to the config file) or a ``postgresql://`` URL.
    database: str | None = None
    #: Compact to this share of the available tokens when the next request would not fit.
    compact_target: float = field(default=0.5, validator=_fraction)
    #: Also compact once history takes more than this share of the available tokens (it
    #: must exceed ``compact_target``); unset: only when the history would not fit whole.
    compact_when: float | None = field(default=None, validator=_share)
    #: Compact to this share after the provider reported a context overflow.
    recovery_target: float = field(default=0.4, validator=_fraction)
    #: Recent turns always kept verbatim, even when compacting for recovery.
    minimum_turns: int = field(default=3, validator=validators.ge(0))
    #: The summarizer compaction calls (``lamina_summarizers``); default: the extractive one.
    summarizer: str = DEFAULT_SUMMARIZER
    #: Most tokens a summary may take (it also gets at most a quarter of the history budget).
    summary_tokens: int = field(default=2048, validator=validators.gt(0))
    #: Role of the summary message, and the marker that opens it.
    summary_role: str = field(
        default="user", validator=validators.in_(("user", "system", "assistant"))
    )
    summary_marker: str = "[Previous conversation summary]"
    #: What a session the ledger does not know yields: an ``error`` or ``empty`` history.
    missing_session: str = field(default="error", validator=validators.in_(("error", "empty")))
    #: What a worker (``role = "worker"``) reads: ``none``, its task and the request are its
    #: context (the Broker design gives workers no manager history); ``session``, the history
    #: of the request's session label, for hosts that give each worker a session of its own.
    worker_history: str = field(default="none", validator=validators.in_(("none", "session")))
    #: Seconds to wait for an SQLite lock, and for a PostgreSQL server to answer.
    busy_timeout: float = field(default=5.0, validator=validators.ge(0))
    connect_timeout: float = field(default=5.0, validator=validators.gt(0))

    def __attrs_post_init__(self) -> None:
        if self.recovery_target > self.compact_target:
            raise ValueError(
                f"recovery_target ({self.recovery_target}) must not exceed compact_target "
                f"({self.compact_target})"
            )
        if self.compact_when is not None and self.compact_when <= self.compact_target:
            raise ValueError(
                f"compact_when ({self.compact_when}) must exceed compact_target "
                f"({self.compact_target}): a compaction brings the request to compact_target, "
                f"and would be due again at once"
            )

    def target(self, config: LaminaConfig) -> str | None:
        """The database to open: a URL as is, a file path resolved against the config file."""
        if self.database is None:
            return None
        if is_postgres(self.database) or self.database.startswith("file:"):
            return self.database
        return str(config.resolve(self.database))


def settings_from(config: LaminaConfig, section: str = "ledger") -> LedgerSettings:
    """The validated section ``[plugins.<section>]`` of ``config`` (defaults when absent)."""
    from lamina import structure

    raw: dict[str, Any] = config.sections.get(section, {})
    return structure(raw, LedgerSettings, file=config.path, what=f"settings of plugin {section!r}")

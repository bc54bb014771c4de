"""A request's memory filters: the settings' defaults, overridden by ``metadata["memory"]``,
and its other ``metadata["memory"]`` options (sources, additional context, strategy); bad
values are a ``ConfigError`` naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from lamina import ConfigError
from lamina_memory.query import Filters
from lamina_memory.settings import STRATEGIES, Settings


def parse_filters(settings: Settings, meta: Mapping[str, Any]) -> Filters:
    """Filters from settings, overridden by the request's ``metadata["memory"]``."""
    raw = meta.get("memory", {}) or {}
    if not isinstance(raw, Mapping):
        raise ConfigError("expected a table", key="request.metadata.memory")

    def strs(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = raw.get(key, default)
        if not _strings(value):
            raise ConfigError("expected a list of strings", key=f"request.metadata.memory.{key}")
        return tuple(value)

    since_raw = raw.get("since", settings.since)
    since = None
    if since_raw is not None:
        try:
            since = (
                since_raw if isinstance(since_raw, datetime) else datetime.fromisoformat(since_raw)
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"expected an ISO date-time, got {since_raw!r}", key="memory.since"
            ) from exc
        if since.tzinfo is None:
            raise ConfigError(f"{since_raw!r} has no timezone", key="memory.since")
    task_id = raw.get("task_id")
    if task_id is not None and not isinstance(task_id, str):
        raise ConfigError("expected a string", key="request.metadata.memory.task_id")
    return Filters(
        task_id=task_id,
        since=since,
        event_types=strs("event_types", settings.event_types),
        entity_types=strs("entity_types", settings.entity_types),
        exclude_ids=frozenset(strs("exclude_ids", settings.exclude_ids)),
    )


def requested_sources(meta: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The sources ``metadata["memory"]["sources"]`` limits the request to, if any."""
    raw = meta.get("memory", {}) or {}
    sources = raw.get("sources") if isinstance(raw, Mapping) else None
    if sources is None:
        return None
    if not _strings(sources):
        raise ConfigError("expected a list of strings", key="request.metadata.memory.sources")
    return tuple(sources)


def additional_context(value: Any) -> str | None:
    """``metadata["memory"]["additional_context"]``: a string, or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError("expected a string", key="request.metadata.memory.additional_context")
    return value


def requested_strategy(value: Any) -> str | None:
    """``metadata["memory"]["strategy"]``: a name of ``STRATEGIES``, or None."""
    if value is None:
        return None
    if value not in STRATEGIES:
        raise ConfigError(
            f"expected one of {', '.join(STRATEGIES)}, got {value!r}",
            key="request.metadata.memory.strategy",
        )
    return str(value)


def _strings(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)

"""The five kinds of memory of the memory framework design, and the candidates retrieval scores.

Every memory carries an ``acl``: the principals that may see it (empty: everyone); see
``visible`` for the rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from attrs import field, frozen, validators

Kind = Literal["event", "chunk", "entity", "relation", "pattern"]
KINDS: tuple[Kind, ...] = ("event", "chunk", "entity", "relation", "pattern")
INTENTS = ("question", "action", "fix", "explain", "other")


def _unit(_inst: object, attr: Any, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{attr.name} must be within 0.0..1.0, got {value!r}")


def _aware(_inst: object, attr: Any, value: Any) -> None:
    if value is None:
        return
    if value.tzinfo is None:
        raise ValueError(f"{attr.name} must carry a timezone, got {value.isoformat()}")
    try:
        value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise ValueError(f"{attr.name} {value.isoformat()} is out of range in UTC") from exc


@frozen(kw_only=True)
class EpisodicEvent:
    """Something that happened in a session: typed, timestamped, with its outcome."""

    id: str
    type: str
    text: str
    time: datetime = field(validator=_aware)
    session: str = ""
    outcome: str | None = None
    salience: float = field(default=0.5, validator=_unit)
    task: str | None = None
    acl: tuple[str, ...] = ()


@frozen(kw_only=True)
class Chunk:
    """A piece of semantic content: text, an optional embedding, when it was written."""

    id: str
    text: str
    time: datetime | None = field(default=None, validator=_aware)
    session: str = ""
    source: str | None = None
    embedding: tuple[float, ...] | None = None
    salience: float = field(default=0.5, validator=_unit)
    acl: tuple[str, ...] = ()


@frozen(kw_only=True)
class Entity:
    """A thing the agent knows of: type, name, properties and how salient it is."""

    id: str
    type: str
    name: str
    properties: dict[str, Any] = field(factory=dict)
    salience: float = field(default=0.5, validator=_unit)
    acl: tuple[str, ...] = ()


@frozen(kw_only=True)
class Relation:
    """A typed, weighted edge between two entities (by id)."""

    id: str
    source: str
    target: str
    type: str
    weight: float = field(default=1.0, validator=_unit)
    acl: tuple[str, ...] = ()


@frozen(kw_only=True)
class Pattern:
    """A procedure that worked before: its trigger keywords, intent and track record."""

    id: str
    text: str
    keywords: tuple[str, ...] = ()
    intent: str = field(default="other", validator=validators.in_(INTENTS))
    successes: int = field(default=0, validator=validators.ge(0))
    applications: int = field(default=0, validator=validators.ge(0))
    acl: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.successes > self.applications:
            raise ValueError(
                f"pattern {self.id!r}: successes ({self.successes}) exceed applications "
                f"({self.applications})"
            )

    @property
    def success_rate(self) -> float:
        """Laplace-smoothed success rate, so an untried pattern scores 0.5."""
        return (self.successes + 1) / (self.applications + 2)


Memory = EpisodicEvent | Chunk | Entity | Relation | Pattern
KIND_OF: dict[type, Kind] = {
    EpisodicEvent: "event",
    Chunk: "chunk",
    Entity: "entity",
    Relation: "relation",
    Pattern: "pattern",
}


def principals(permissions: Iterable[str], metadata: dict[str, Any], role: str) -> frozenset[str]:
    """Who the caller is: each permission, ``user:<metadata user>`` and ``role:<role>``."""
    out = set(permissions)
    user = metadata.get("user") or metadata.get("user_id")
    if user:
        out.add(f"user:{user}")
    out.add(f"role:{role}")
    return frozenset(out)


def visible(acl: tuple[str, ...], who: frozenset[str]) -> bool:
    """A memory with an empty ACL is public; otherwise the caller must hold one of its entries."""
    return not acl or not who.isdisjoint(acl)


def one_line(text: str) -> str:
    """An item is one line of its section: line breaks and runs of whitespace become one
    space (a megabyte of blanks in a memory costs nothing in the prompt)."""
    return " ".join(text.split())


@frozen(kw_only=True)
class Candidate:
    """One memory as a retrieval source proposes it: its rendered line and its scores."""

    key: str
    source: str
    section: str
    text: str = field(converter=one_line)
    relevance: float
    recency: float = 0.0
    salience: float = 0.5
    score: float = 0.0
    tokens: int = 0
    kind: Kind = "chunk"
    source_id: str = ""
    time: datetime | None = None

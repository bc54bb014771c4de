"""What the service and retrieval ask of a memory store (``Store``), and what it reads back in
one transaction (``Contents``); ``store.SQLStore`` is the one implementation."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from attrs import frozen

from lamina_memory.pgread import Hit, Near
from lamina_memory.pgsearch import Progress
from lamina_memory.records import Chunk, Entity, EpisodicEvent, Memory, Pattern, Relation

__all__ = ["Contents", "Store"]


@frozen(kw_only=True)
class Contents:
    """Everything a store holds at one ``version``, read in one transaction."""

    version: int
    events: list[EpisodicEvent]
    chunks: list[Chunk]
    entities: list[Entity]
    relations: list[Relation]
    patterns: list[Pattern]


class Store(Protocol):
    """What the service and retrieval ask of a store."""

    url: str
    name: str

    def add(self, memories: Iterable[Memory]) -> int: ...

    def write(
        self, memories: Iterable[Memory], *, marks: Mapping[str, str | None] | None = None
    ) -> int: ...

    def mark(self, key: str) -> str | None: ...

    def put_mark(self, key: str, value: str) -> None: ...

    def version(self) -> int: ...

    def embedding_dim(self) -> int | None: ...

    def contents(self, *, chunks: bool = True) -> Contents: ...

    def count(self) -> int: ...

    def reindex(self, progress: Progress | None = None) -> int: ...

    @property
    def searches_chunks(self) -> bool: ...

    def search_chunks(
        self,
        terms: Sequence[str],
        vector: Any,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
        limit: int,
        overfetch: int,
    ) -> tuple[list[Hit], list[Hit]]: ...

    def chunks_around(
        self,
        hits: Sequence[tuple[int, str]],
        reach: int,
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> Near: ...

    def chunks_at(
        self,
        seqs: Sequence[int],
        *,
        who: frozenset[str],
        since: datetime | None,
        exclude: frozenset[str],
    ) -> list[Hit]: ...

    def events(self) -> list[EpisodicEvent]: ...

    def chunks(self) -> list[Chunk]: ...

    def entities(self) -> list[Entity]: ...

    def relations(self) -> list[Relation]: ...

    def patterns(self) -> list[Pattern]: ...

    @property
    def indexes_vectors(self) -> bool: ...

    def nearest(self, vector: Iterable[float], k: int) -> list[tuple[str, float]]: ...

    def close(self) -> None: ...

"""An in-memory snapshot of a store for retrieval: BM25 over chunks, the vector matrix, the graph.

A snapshot is rebuilt only when the store's version moves behind the service's back. Chunks the
service writes itself are folded in (streaming): appended ones join the end, a re-added one
replaces its old self in place (text, ACL, vector), so a revoked permission holds from the next
query on. The BM25 index is not rebuilt for them: until the unindexed share grows past a
fraction of the corpus, they are scored with the same BM25 formula against the indexed
statistics. Every fold makes a new, immutable ``ChunkIndex``: a query reads one consistent view.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lamina_memory.records import Chunk, Entity, EpisodicEvent, Pattern, Relation
from lamina_memory.signals import analyse

if TYPE_CHECKING:
    import numpy as np

K1, B = 1.5, 0.75


class _Indexed:
    """The BM25 index (``bm25s``, Lucene variant) of a corpus and its statistics, built once."""

    def __init__(self, docs: Sequence[list[str]]) -> None:
        import bm25s  # type: ignore[import-untyped]

        self.size = len(docs)
        # bm25s divides by the average length: an all-empty corpus has nothing to index.
        self.retriever: Any = bm25s.BM25(k1=K1, b=B) if any(docs) else None
        if self.retriever is not None:
            self.retriever.index(list(docs), show_progress=False)
        self.df: Counter[str] = Counter()
        for d in docs:
            self.df.update(set(d))
        total = sum(len(d) for d in docs)
        self.avgdl = total / len(docs) if total else 1.0

    def bm25(self, doc: Sequence[str], terms: Sequence[str]) -> float:
        """BM25 of one unindexed document against the indexed statistics, as the index scores
        (``bm25s``'s Lucene variant: Lucene's idf, and a term-frequency part without the
        classic ``k1 + 1`` factor), so a streamed chunk and an indexed one compare fairly."""
        n = max(self.size, 1)
        tf = Counter(doc)
        s = 0.0
        for t in terms:
            f = tf.get(t, 0)
            if not f:
                continue
            df = self.df.get(t, 0)
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * f / (f + K1 * (1 - B + B * len(doc) / self.avgdl))
        return s


class Lexical:
    """BM25 over analysed chunk texts: the indexed corpus, plus documents folded in since,
    appended (``tail``) or replacing indexed ones (``patched``, by position). Immutable:
    ``folded`` returns a new one sharing the index."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.indexed = _Indexed([analyse(t) for t in texts])
        self.base = self.indexed.size
        self.tail: tuple[list[str], ...] = ()
        self.patched: Mapping[int, list[str]] = {}

    def folded(
        self, *, appended: Sequence[str] = (), replaced: Mapping[int, str] | None = None
    ) -> Lexical:
        """A copy with ``appended`` texts at the end and ``replaced`` texts (by position)."""
        out = object.__new__(Lexical)
        out.indexed, out.base = self.indexed, self.base
        tail = list(self.tail)
        patched = dict(self.patched)
        for pos, text in (replaced or {}).items():
            if pos < self.base:
                patched[pos] = analyse(text)
            else:
                tail[pos - self.base] = analyse(text)
        tail.extend(analyse(t) for t in appended)
        out.tail, out.patched = tuple(tail), patched
        return out

    @property
    def unindexed(self) -> int:
        """How many documents are scored outside the BM25 index."""
        return len(self.tail) + len(self.patched)

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """A BM25 score for every document, indexed first, then the tail."""
        import numpy as np

        out = np.zeros(self.base + len(self.tail), dtype=np.float32)
        terms = list(dict.fromkeys(query))
        if not terms:
            return out
        retriever = self.indexed.retriever
        if retriever is not None:
            known = [t for t in terms if t in retriever.vocab_dict]
            if known:
                out[: self.base] = retriever.get_scores(known)
        for pos, doc in self.patched.items():
            out[pos] = self.indexed.bm25(doc, terms)
        for i, doc in enumerate(self.tail):
            out[self.base + i] = self.indexed.bm25(doc, terms)
        return out


class ChunkIndex:
    """One immutable view of the chunks: their order, BM25, vectors and access arrays."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        *,
        lexical: Lexical | None = None,
        vectors: np.ndarray | None = None,
    ) -> None:
        import numpy as np

        self.chunks: tuple[Chunk, ...] = tuple(chunks)
        self.chunk_pos = {c.id: i for i, c in enumerate(self.chunks)}
        self.lexical = lexical if lexical is not None else Lexical([c.text for c in chunks])
        dims = {len(c.embedding) for c in self.chunks if c.embedding is not None}
        self.dim = dims.pop() if len(dims) == 1 else None
        n = len(self.chunks)
        self.has_vector = np.fromiter(
            (c.embedding is not None and self.dim is not None for c in self.chunks),
            dtype=bool,
            count=n,
        )
        if vectors is None or vectors.shape[1] != (self.dim or 0):
            vectors = np.zeros((n, self.dim or 0), dtype=np.float32)
            for i, c in enumerate(self.chunks):
                if self.has_vector[i]:
                    vectors[i] = c.embedding
        self.vectors = vectors
        codes: dict[str, int] = {}
        #: Each chunk's session as a number (equal numbers, same session).
        self.sessions = np.fromiter(
            (codes.setdefault(c.session, len(codes)) for c in self.chunks), dtype=np.int64, count=n
        )
        self.public = np.fromiter((not c.acl for c in self.chunks), dtype=bool, count=n)
        self.restricted = [i for i, c in enumerate(self.chunks) if c.acl]
        self.times = np.fromiter(
            (np.nan if c.time is None else c.time.timestamp() for c in self.chunks),
            dtype=np.float64,
            count=n,
        )

    def folded(self, chunks: Sequence[Chunk]) -> ChunkIndex:
        """A new view with ``chunks`` written: a known id is replaced in place, a new one is
        appended (a batch that repeats an id keeps the last, at the first one's place, as the
        store does)."""
        import numpy as np

        latest: dict[str, Chunk] = {}
        for c in chunks:
            latest[c.id] = c
        replaced = {self.chunk_pos[i]: c for i, c in latest.items() if i in self.chunk_pos}
        appended = [c for i, c in latest.items() if i not in self.chunk_pos]
        merged = list(self.chunks)
        for pos, c in replaced.items():
            merged[pos] = c
        merged.extend(appended)
        lexical = self.lexical.folded(
            appended=[c.text for c in appended],
            replaced={pos: c.text for pos, c in replaced.items()},
        )
        vectors = None
        if self.dim is not None and all(
            c.embedding is None or len(c.embedding) == self.dim for c in latest.values()
        ):
            vectors = np.zeros((len(merged), self.dim), dtype=np.float32)
            vectors[: len(self.chunks)] = self.vectors
            for pos, c in [*replaced.items(), *enumerate(appended, start=len(self.chunks))]:
                vectors[pos] = 0.0 if c.embedding is None else c.embedding
        return ChunkIndex(merged, lexical=lexical, vectors=vectors)

    def mask(self, who: frozenset[str], since: datetime | None, exclude: frozenset[str]) -> Any:
        """Which chunks the caller may see and the filters keep (undated chunks pass ``since``)."""
        import numpy as np

        mask = self.public.copy()
        for i in self.restricted:
            if not who.isdisjoint(self.chunks[i].acl):
                mask[i] = True
        if since is not None:
            with np.errstate(invalid="ignore"):
                mask &= ~(self.times < since.timestamp())
        for cid in exclude:
            pos = self.chunk_pos.get(cid)
            if pos is not None:
                mask[pos] = False
        return mask


class Snapshot:
    """What retrieval reads, built from one version of a store; ``index`` is the chunks' current
    view (a source reads it once per query)."""

    def __init__(
        self,
        *,
        version: int,
        events: list[EpisodicEvent],
        chunks: list[Chunk],
        entities: list[Entity],
        relations: list[Relation],
        patterns: list[Pattern],
        chunks_in_store: bool = False,
    ) -> None:
        self.version = version
        #: The store searches the chunks itself (PostgreSQL): this snapshot holds none, and
        #: chunks written through the service only move its version.
        self.chunks_in_store = chunks_in_store
        self.events = sorted(events, key=lambda e: (e.time, e.id))
        self.index = ChunkIndex(chunks)
        self.entities = entities
        self.entity_by_id = {e.id: e for e in entities}
        self.entity_by_name = {e.name.lower(): e for e in entities}
        self.relations = relations
        self.adjacency: dict[str, list[Relation]] = defaultdict(list)
        for r in relations:
            self.adjacency[r.source].append(r)
            self.adjacency[r.target].append(r)
        self.patterns = patterns
        self._lock = threading.Lock()

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        return self.index.chunks

    @property
    def lexical(self) -> Lexical:
        return self.index.lexical

    @property
    def dim(self) -> int | None:
        return self.index.dim

    def fold(self, chunks: Sequence[Chunk], version: int) -> None:
        """Write ``chunks`` into the live view (replacing known ids) and move to ``version``."""
        with self._lock:
            if not self.chunks_in_store:
                self.index = self.index.folded(chunks)
            self.version = version

    @property
    def tail_fraction(self) -> float:
        """The share of chunks scored outside the BM25 index."""
        lexical = self.index.lexical
        return lexical.unindexed / max(1, lexical.base)

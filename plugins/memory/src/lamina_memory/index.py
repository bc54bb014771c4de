"""An in-memory snapshot of a store for retrieval: BM25 over chunks, the vector matrix, the graph.

A snapshot is rebuilt only when the store's version moves; chunks appended since (streaming)
are folded in incrementally: the BM25 index is rebuilt in the background of the next query
only once the unindexed tail grows past a fraction of the corpus, and until then the tail is
scored with the same BM25 formula against the indexed corpus statistics.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from lamina_memory.records import Chunk, Entity, EpisodicEvent, Pattern, Relation
from lamina_memory.signals import analyse

if TYPE_CHECKING:
    import numpy as np

K1, B = 1.5, 0.75


class Lexical:
    """BM25 (``bm25s``, Lucene variant) over analysed chunk texts, plus an unindexed tail."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        self.base = len(texts)
        docs = [analyse(t) for t in texts]
        # bm25s divides by the average length: an all-empty corpus has nothing to index.
        self.retriever = bm25s.BM25(k1=K1, b=B) if any(docs) else None
        if self.retriever is not None:
            self.retriever.index(docs, show_progress=False)
        self.df: Counter[str] = Counter()
        for d in docs:
            self.df.update(set(d))
        self.avgdl = max(1.0, sum(len(d) for d in docs) / len(docs)) if docs else 1.0
        self.tail: list[list[str]] = []

    def append(self, texts: Sequence[str]) -> None:
        """Add documents without re-indexing (scored against the indexed statistics)."""
        self.tail.extend(analyse(t) for t in texts)

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """A BM25 score for every document, indexed first, then the tail."""
        import numpy as np

        out = np.zeros(self.base + len(self.tail), dtype=np.float32)
        terms = [t for t in dict.fromkeys(query)]
        if not terms:
            return out
        if self.retriever is not None:
            vocab = self.retriever.vocab_dict
            known = [t for t in terms if t in vocab]
            if known:
                out[: self.base] = self.retriever.get_scores(known)
        n = max(self.base, 1)
        for i, doc in enumerate(self.tail):
            tf = Counter(doc)
            s = 0.0
            for t in terms:
                f = tf.get(t, 0)
                if not f:
                    continue
                idf = math.log(1 + (n - self.df.get(t, 0) + 0.5) / (self.df.get(t, 0) + 0.5))
                s += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * len(doc) / self.avgdl))
            out[self.base + i] = s
        return out


class Snapshot:
    """What retrieval reads, built from one version of a store."""

    def __init__(
        self,
        *,
        version: int,
        events: list[EpisodicEvent],
        chunks: list[Chunk],
        entities: list[Entity],
        relations: list[Relation],
        patterns: list[Pattern],
    ) -> None:
        import numpy as np

        self.version = version
        self.events = sorted(events, key=lambda e: (e.time, e.id))
        self.chunks = list(chunks)
        self.chunk_pos = {c.id: i for i, c in enumerate(self.chunks)}
        self.lexical = Lexical([c.text for c in self.chunks])
        self.entities = entities
        self.entity_by_id = {e.id: e for e in entities}
        self.entity_by_name = {e.name.lower(): e for e in entities}
        self.relations = relations
        self.adjacency: dict[str, list[Relation]] = defaultdict(list)
        for r in relations:
            self.adjacency[r.source].append(r)
            self.adjacency[r.target].append(r)
        self.patterns = patterns
        dims = {len(c.embedding) for c in self.chunks if c.embedding is not None}
        self.dim = dims.pop() if len(dims) == 1 else None
        self.vectors = np.zeros((len(self.chunks), self.dim or 0), dtype=np.float32)
        self.has_vector = np.zeros(len(self.chunks), dtype=bool)
        for i, c in enumerate(self.chunks):
            if c.embedding is not None and self.dim is not None:
                self.vectors[i] = c.embedding
                self.has_vector[i] = True
        self._lock = threading.Lock()
        self._index_access()

    def _index_access(self) -> None:
        """Arrays that let a query filter chunks without a Python loop over all of them."""
        import numpy as np

        self.public = np.fromiter(
            (not c.acl for c in self.chunks), dtype=bool, count=len(self.chunks)
        )
        self.restricted = [i for i, c in enumerate(self.chunks) if c.acl]
        self.times = np.fromiter(
            (np.nan if c.time is None else c.time.timestamp() for c in self.chunks),
            dtype=np.float64,
            count=len(self.chunks),
        )

    def chunk_mask(
        self, who: frozenset[str], since: datetime | None, exclude: frozenset[str]
    ) -> np.ndarray:
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

    def extend_chunks(self, chunks: Sequence[Chunk], version: int) -> None:
        """Fold newly appended chunks in without rebuilding the BM25 index (streaming)."""
        import numpy as np

        fresh = [c for c in chunks if c.id not in self.chunk_pos]
        with self._lock:
            for c in fresh:
                self.chunk_pos[c.id] = len(self.chunks)
                self.chunks.append(c)
            self.lexical.append([c.text for c in fresh])
            rows = np.zeros((len(fresh), self.vectors.shape[1]), dtype=np.float32)
            has = np.zeros(len(fresh), dtype=bool)
            for i, c in enumerate(fresh):
                if (
                    c.embedding is not None
                    and self.dim is not None
                    and len(c.embedding) == self.dim
                ):
                    rows[i] = c.embedding
                    has[i] = True
            self.vectors = np.vstack([self.vectors, rows])
            self.has_vector = np.concatenate([self.has_vector, has])
            self._index_access()
            self.version = version

    @property
    def tail_fraction(self) -> float:
        return len(self.lexical.tail) / max(1, self.lexical.base)

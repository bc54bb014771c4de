"""The retrieval arithmetic the issue found wrong: the streamed tail scored like the index,
Snowball stems, partial top-k selection, and one BLAS thread while embedding."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lamina_memory import semantic
from lamina_memory.embedders import register_embedder
from lamina_memory.index import Lexical
from lamina_memory.records import Chunk
from lamina_memory.signals import analyse, stem

from lamina import ConfigError

CORPUS = [
    "the staging deploy failed because the vault token expired",
    "Caroline went hiking with her kids in the mountains last summer",
    "Melanie is painting a sunrise over the lake",
    "the deploy pipeline runs nightly and posts to the ops channel",
    "a vault token is rotated every thirty days",
]


@pytest.mark.parametrize("doc", [0, 1, 3])
def test_tail_scores_a_document_exactly_as_the_index_does(doc: int) -> None:
    lexical = Lexical(CORPUS)
    folded = lexical.folded(appended=[CORPUS[doc]])  # the same text again, in the tail
    for query in ("deploy vault token", "hiking kids summer", "painting lake sunrise deploy"):
        scores = folded.scores(analyse(query))
        assert scores[len(CORPUS)] == pytest.approx(float(scores[doc]), rel=1e-5)


def test_a_replaced_document_scores_as_the_index_does() -> None:
    lexical = Lexical(CORPUS)
    patched = lexical.folded(replaced={4: CORPUS[0]})
    scores = patched.scores(analyse("vault token deploy"))
    assert scores[4] == pytest.approx(float(scores[0]), rel=1e-5)


def test_snowball_stems() -> None:
    assert stem("caring") == "care"  # the hand-written stemmer made "car"
    assert stem("hoping") == "hope"  # and "hop"
    assert analyse("She was caring for the cars") == ["care", "car"]


def test_missing_pystemmer_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import lamina_memory.signals as signals

    monkeypatch.setitem(sys.modules, "Stemmer", None)
    monkeypatch.setattr(signals, "_STEMMERS", type(signals._STEMMERS)())
    with pytest.raises(ConfigError, match=r"plugin 'memory'.*pip install PyStemmer"):
        analyse("running")


def _reference(scores: np.ndarray, mask: np.ndarray, limit: int) -> list[int]:
    idx = np.flatnonzero(mask & (scores > 0))
    return [int(i) for i in idx[np.argsort(-scores[idx], kind="stable")[:limit]]]


@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, -1.0]), min_size=0, max_size=60),
    st.integers(min_value=0, max_value=70),
    st.randoms(use_true_random=False),
)
def test_partial_selection_ranks_like_a_full_sort(
    values: list[float], limit: int, rnd: Any
) -> None:
    scores = np.array(values, dtype=np.float32)
    mask = np.array([rnd.random() < 0.8 for _ in values], dtype=bool)
    assert semantic._rank(scores, mask, limit) == _reference(scores, mask, limit)


def test_top_k_sorts_only_the_k_best(monkeypatch: pytest.MonkeyPatch) -> None:
    sorted_sizes: list[int] = []
    real = np.argsort

    def spy(a: Any, *args: Any, **kw: Any) -> Any:
        sorted_sizes.append(int(np.size(a)))
        return real(a, *args, **kw)

    monkeypatch.setattr(np, "argsort", spy)
    scores = np.random.default_rng(1).random(100_000).astype(np.float32) + 0.01
    top = semantic._rank(scores, np.ones(scores.size, dtype=bool), 200)
    assert len(top) == 200 and scores[top[0]] == scores.max()
    assert sorted_sizes and max(sorted_sizes) <= 200


class _BlasProbe:
    """An embedder that records how many threads BLAS had while it ran."""

    name = "blas-probe"
    dim = 3
    seen: ClassVar[list[int]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from threadpoolctl import threadpool_info

        _BlasProbe.seen.append(
            min(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
        )
        out = np.ones((len(texts), 3), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


register_embedder("blas-probe", lambda options: _BlasProbe())


def test_embedding_runs_on_one_blas_thread(make: Any) -> None:
    from threadpoolctl import threadpool_limits

    _BlasProbe.seen.clear()
    with threadpool_limits(limits=4, user_api="blas"):
        asm, svc = make({"embedder": "blas-probe"})
        svc.add([Chunk(id="a", text="the vault token")])  # embeds the chunk
        asm.assemble(asm.request("where is the vault token?"))  # embeds the query
        from threadpoolctl import threadpool_info

        after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert _BlasProbe.seen == [1, 1]
    assert min(after) == 4  # restored after each embedding


class _Waits:
    """An embedder whose query embedding waits until the BM25 scoring of that query began
    (and records whether it did): it can only finish if the sources run while it embeds."""

    name = "waits-for-bm25"
    dim = 3
    began = threading.Event()
    saw: ClassVar[list[bool]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(t.endswith("?") for t in texts):
            _Waits.saw.append(_Waits.began.wait(timeout=5))
        out = np.ones((len(texts), 3), dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


register_embedder("waits-for-bm25", lambda options: _Waits())


def test_the_query_is_embedded_while_the_sources_run(
    make: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The query's embedding is computed on the sources' pool, first, and the sources start
    meanwhile: BM25 does not wait for it, only the dense ranking does."""
    real = Lexical.scores

    def scores(self: Lexical, terms: Any) -> Any:
        _Waits.began.set()
        return real(self, terms)

    monkeypatch.setattr(Lexical, "scores", scores)
    _Waits.began.clear()
    _Waits.saw.clear()
    asm, svc = make({"embedder": "waits-for-bm25"})
    svc.add([Chunk(id="a", text="the vault token"), Chunk(id="b", text="other words")])
    ctx = asm.assemble(asm.request("where is the vault token?"))
    assert _Waits.saw == [True]
    assert "vault token" in ctx.current_message.text + "".join(m.text for m in ctx.history)


class _Broken:
    """An embedder that embeds chunks but fails on the query."""

    name = "broken-on-query"
    dim = 3

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(t.endswith("?") for t in texts):
            raise RuntimeError("model offline")
        return np.ones((len(texts), 3), dtype=np.float32) / np.sqrt(3)


register_embedder("broken-on-query", lambda options: _Broken())


def test_a_failing_query_embedding_fails_the_semantic_source(make: Any) -> None:
    """The embedding fails inside the semantic source (it waits for it there). The source is
    required by default, so the memory layer is left out with a warning naming the cause;
    made optional, only that source drops out, with its own warning."""
    asm, svc = make({"embedder": "broken-on-query"})
    svc.add([Chunk(id="a", text="the vault token")])
    ctx = asm.assemble(asm.request("where is the vault token?"))
    assert any("RuntimeError: model offline" in w for w in ctx.report.warnings)
    asm, svc = make({"embedder": "broken-on-query", "required_sources": []})
    svc.add([Chunk(id="a", text="the vault token")])
    ctx = asm.assemble(asm.request("where is the vault token?"))
    assert any(
        "memory source 'semantic' failed (RuntimeError: model offline)" in w
        for w in ctx.report.warnings
    ), ctx.report.warnings

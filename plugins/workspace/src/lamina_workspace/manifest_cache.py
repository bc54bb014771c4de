"""The last valid reading of each workspace's manifest, kept in Lamina's cache directory so an
unchanged ``working-set.yml`` is not parsed again: ruamel.yaml's import and round-trip parse
cost a start about 12 ms.

One file (``workspace/manifests.json``) holds, for the last ``KEPT`` manifests read (by
root and path), each validated manifest as JSON under a key: the sha256 of the manifest's text, its path, and what
reads it (this plugin's ``manifest.py`` and ruamel.yaml's ``__init__.py``, by size and
modification time). Any other text or reader is a miss: the manifest is parsed as before and
the file written again. Only a manifest whose every value JSON gives back exactly (``plain``:
strings, integers, floats, booleans, null, lists, mappings with string keys) is kept; an invalid one
never is (its error is raised each time). A damaged or unreadable file is a miss; a cache
directory that is missing, cannot be written or is off (``LAMINA_CACHE_DIR=""``) only means
parsing every time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from lamina import cache_dir, write_atomically
from lamina_workspace.manifest import Budget, FileEntry, Manifest

#: Bumped whenever the file's layout changes.
FORMAT = 1
#: Manifests kept (one per workspace, the most recently written first).
KEPT = 32


class NotPlain(Exception):
    """A value JSON would not give back as it is."""


def cache_file() -> Path | None:
    """The cache file (``None``: caching is off)."""
    folder = cache_dir()
    return None if folder is None else folder / "workspace" / "manifests.json"


def location(root: Path, path: str) -> str:
    """What names the manifest ``path`` beneath ``root`` in the file."""
    import hashlib

    return hashlib.sha256(f"{root}\0{path}".encode("utf-8", "surrogatepass")).hexdigest()[:24]


def key(text: str, path: str) -> str:
    """What a reading depends on: the text, the path it names, and the reader's files."""
    import hashlib

    digest = hashlib.sha256(f"{FORMAT}\0{path}\0{_readers()}\0".encode("utf-8", "surrogatepass"))
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _readers() -> str:
    from importlib.util import find_spec

    from lamina_workspace import manifest

    files: list[str | None] = [manifest.__file__]
    try:
        spec = find_spec("ruamel.yaml")
    except (ImportError, ValueError):
        spec = None
    files.append(spec.origin if spec is not None else None)
    return " ".join(_stat(f) for f in files)


def _stat(path: str | None) -> str:
    if path is None:
        return "-"
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{path} {st.st_size} {st.st_mtime_ns}"


def entries(file: Path) -> dict[str, Any]:
    """The file's manifests by location, most recently written first (none when the file
    is missing or damaged)."""
    try:
        data = json.loads(file.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    found = data.get("entries")
    return found if isinstance(found, dict) else {}


def read(kept: dict[str, Any], where: str, expected: str, source: str) -> Manifest | None:
    """The manifest kept for ``where`` under ``expected``, or ``None``."""
    try:
        entry = kept[where]
        if entry["key"] != expected:
            return None
        return _from_json(entry["manifest"], source)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None


def write(file: Path, kept: dict[str, Any], where: str, key: str, manifest: Manifest) -> None:
    """Keep ``manifest`` for ``where`` under ``key`` when JSON gives every value back as it
    is, with the other manifests kept (``KEPT`` in all)."""
    try:
        document = _to_json(manifest)
    except NotPlain:
        return
    fresh: dict[str, Any] = {where: {"key": key, "manifest": document}}
    for other, entry in kept.items():
        if len(fresh) >= KEPT:
            break
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            fresh.setdefault(other, entry)
    write_atomically(file, json.dumps({"format": FORMAT, "entries": fresh}).encode())


def plain(value: Any) -> Any:
    """``value`` with ruamel's strings, floats, mappings and sequences made the plain types
    they extend; ``NotPlain`` for anything else (a date, a set, a mapping's non-string key, an
    integer of ruamel's own type: one written in hex or anchored, or an anchored boolean)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    raise NotPlain(value)


def _to_json(m: Manifest) -> dict[str, Any]:
    budget = m.budget
    return {
        "protocol": plain(m.protocol),
        "budget": None
        if budget is None
        else [budget.max_tokens, budget.reserved_for_response, budget.effective],
        "files": [
            [f.path, f.priority, f.role, f.truncate_strategy, f.max_lines, f.line] for f in m.files
        ],
        "metadata": plain(m.metadata),
    }


def _from_json(data: dict[str, Any], source: str) -> Manifest:
    budget = data["budget"]
    files = tuple(
        FileEntry(
            path=path,
            priority=priority,
            role=role,
            truncate_strategy=strategy,
            max_lines=max_lines,
            line=line,
        )
        for path, priority, role, strategy, max_lines, line in data["files"]
    )
    for entry in files:
        if type(entry.path) is not str or type(entry.priority) is not float:
            raise TypeError("not a manifest entry")
    metadata = data["metadata"]
    if type(metadata) is not dict or type(data["protocol"]) is not str:
        raise TypeError("not a manifest")
    return Manifest(
        source=source,
        protocol=data["protocol"],
        budget=None
        if budget is None
        else Budget(max_tokens=budget[0], reserved_for_response=budget[1], effective=budget[2]),
        files=files,
        metadata=metadata,
    )

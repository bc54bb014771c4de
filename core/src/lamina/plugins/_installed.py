"""What is installed, for loading plugins: the ``lamina`` entry points and the kernel's version,
read through a cache so a start need not import ``importlib.metadata`` (about 20 ms with its
email, zipfile and csv imports and the search of every distribution).

The cache file in Lamina's cache directory (``plugins/entry-points-<hash>.json``, one per
interpreter and group) holds the last few answers of ``importlib.metadata`` (``KEPT``), each
with the fingerprint of what it depends on: each ``sys.path`` entry (for a file, a zip, its
size, modification time and inode) and, in the order ``importlib.metadata`` finds them in a
folder, each ``*.dist-info`` / ``*.egg-info`` with the size, modification time and inode of
itself, its ``entry_points.txt`` and its ``METADATA`` / ``PKG-INFO`` (read with ``os.scandir``
and ``os.stat``; not the folder's own time, which any file made there changes). Installing,
removing or upgrading a distribution changes the fingerprint, and the next start asks
``importlib.metadata`` again. A damaged file is ignored and written again; a cache directory
that is missing, cannot be written or is turned off (``LAMINA_CACHE_DIR=""``) only means
asking ``importlib.metadata`` every time. So does a meta path finder other than Python's own
that can find distributions (``find_distributions``): its distributions are not in the
fingerprint.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from attrs import frozen

if TYPE_CHECKING:
    from pathlib import Path

#: Bumped whenever the file's layout changes.
FORMAT = 2
#: Answers kept per interpreter: one per ``sys.path`` in use (``lamina``, ``python -m lamina``
#: from a few folders, a test's own), the most recent first.
KEPT = 8
#: ``importlib.metadata.EntryPoint``'s reading of a value: ``module[:attr.attr][ [extras]]``.
_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
_METADATA_FILES = ("entry_points.txt", "METADATA", "PKG-INFO")


@frozen(kw_only=True)
class EntryPoint:
    """One entry point of a group, with its distribution's name and version."""

    name: str
    value: str
    distribution: str
    version: str

    def load(self) -> Any:
        """Import the object the entry point names (as ``importlib.metadata`` does)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"not an entry point value: {self.value!r}")
        target = importlib.import_module(match.group("module"))
        for attr in filter(None, (match.group("attr") or "").split(".")):
            target = getattr(target, attr)
        return target


@frozen(kw_only=True)
class Installed:
    """A group's entry points (sorted by name) and the kernel distribution's version."""

    entry_points: tuple[EntryPoint, ...]
    kernel_version: str


def installed(group: str, kernel: str) -> Installed:
    """``group``'s entry points and ``kernel``'s version, from the cache when what is
    installed has not changed since it was written."""
    path = _cache_file(group)
    if path is None or not _standard_finders():
        return _ask(group, kernel)
    fingerprint = _fingerprint(group, kernel)
    entries = _entries(path)
    found = _find(entries, fingerprint)
    if found is None:
        found = _ask(group, kernel)
        _write(path, fingerprint, found, entries)
    return found


def _ask(group: str, kernel: str) -> Installed:
    """What ``importlib.metadata`` says."""
    from importlib import metadata

    points = []
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
        points.append(
            EntryPoint(
                name=ep.name,
                value=ep.value,
                distribution=ep.dist.name if ep.dist else "(unknown distribution)",
                version=ep.dist.version if ep.dist else "",
            )
        )
    try:
        version = metadata.version(kernel)
    except metadata.PackageNotFoundError:
        version = ""
    return Installed(entry_points=tuple(points), kernel_version=version)


def _standard_finders() -> bool:
    """Whether only Python's own path finder finds distributions."""
    from importlib.machinery import PathFinder

    return all(
        finder is PathFinder or not hasattr(finder, "find_distributions")
        for finder in sys.meta_path
    )


def _cache_file(group: str) -> Path | None:
    import hashlib

    from lamina.encodings import cache_dir

    root = cache_dir()
    if root is None:
        return None
    where = hashlib.sha256(repr((sys.executable, group)).encode()).hexdigest()[:16]
    return root / "plugins" / f"entry-points-{where}.json"


def _fingerprint(group: str, kernel: str) -> str:
    import hashlib

    digest = hashlib.sha256(repr((FORMAT, group, kernel)).encode())
    for line in _installed_lines():
        digest.update(line.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _installed_lines() -> Iterator[str]:
    """One line per ``sys.path`` entry and per distribution's metadata found in it."""
    for entry in sys.path:
        if not isinstance(entry, str):
            yield f"entry {entry!r}\n"
            continue
        base = entry or "."
        yield f"entry {entry!r}\n"
        egg = base.endswith(".egg")
        try:
            children = os.scandir(base)
        except OSError:  # a zip file (its distributions are inside) or nothing
            yield f"  file {_stat(base)}\n"
            continue
        with children:
            for child in children:
                low = child.name.lower()
                if low.endswith((".dist-info", ".egg-info")) or (egg and low == "egg-info"):
                    path = child.path
                    yield f"  {child.name!r} {_stat(path)}\n"
                    for name in _METADATA_FILES:
                        yield f"    {name} {_stat(os.path.join(path, name))}\n"


def _stat(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _entries(path: Path) -> list[Any]:
    """The file's answers, most recent first (none when it is missing or damaged)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return []
    entries = data.get("entries")
    return entries if isinstance(entries, list) else []


def _find(entries: list[Any], fingerprint: str) -> Installed | None:
    """The answer stored under ``fingerprint``, when it is whole."""
    for entry in entries:
        try:
            if entry["fingerprint"] != fingerprint:
                continue
            points = tuple(
                EntryPoint(name=name, value=value, distribution=dist, version=version)
                for name, value, dist, version in entry["entry_points"]
            )
            kernel = entry["kernel_version"]
        except (ValueError, TypeError, KeyError):
            return None
        fields = [
            kernel,
            *(f for p in points for f in (p.name, p.value, p.distribution, p.version)),
        ]
        if not all(type(f) is str for f in fields):
            return None
        return Installed(entry_points=points, kernel_version=kernel)
    return None


def _write(path: Path, fingerprint: str, found: Installed, entries: list[Any]) -> None:
    """Store ``found`` first, then the other answers still kept (``KEPT`` in all)."""
    from lamina.encodings import write_atomically

    entry = {
        "fingerprint": fingerprint,
        "kernel_version": found.kernel_version,
        "entry_points": [[p.name, p.value, p.distribution, p.version] for p in found.entry_points],
    }
    others = [
        e
        for e in entries
        if isinstance(e, dict)
        and isinstance(e.get("fingerprint"), str)
        and e["fingerprint"] != fingerprint
    ]
    data = {"format": FORMAT, "entries": [entry, *others][:KEPT]}
    write_atomically(path, json.dumps(data, indent=1).encode())

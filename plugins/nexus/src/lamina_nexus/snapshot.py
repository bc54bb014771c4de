"""The capability snapshot: what ``nexus status --json --brief`` prints, parsed and checked.

Only names, categories, statuses, reasons and credential counts are kept; any other field
(a token, a secret) is dropped on parsing so it can never reach the prompt.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from attrs import frozen

Status = Literal["ready", "needs_setup", "broken"]
STATUSES: tuple[Status, ...] = ("ready", "needs_setup", "broken")
_STATUS_ALIASES: dict[str, Status] = {
    "ready": "ready",
    "ok": "ready",
    "needs_setup": "needs_setup",
    "needs-setup": "needs_setup",
    "setup": "needs_setup",
    "broken": "broken",
    "error": "broken",
}
#: Snapshots larger than this are refused (a status summary is a few KiB).
MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024


class SnapshotError(Exception):
    """A snapshot that cannot be read or does not have the expected shape.

    Deliberately not a ``LaminaError``: raised from the provider it becomes a warning in the
    report (the environment is left out), not a failed assembly.
    """


@frozen(kw_only=True)
class Capability:
    """One capability (skill) and whether it can be used now."""

    name: str
    category: str
    status: Status
    reason: str | None = None


@frozen(kw_only=True)
class Credentials:
    """Credential counts; the names of broken ones (never a value)."""

    configured: int = 0
    broken: tuple[str, ...] = ()
    broken_count: int = 0


@frozen(kw_only=True)
class Snapshot:
    """A parsed snapshot and the hash of its meaningful content (timestamps excluded)."""

    capabilities: tuple[Capability, ...]
    credentials: Credentials
    sha256: str
    source: str


def parse_snapshot(text: str | bytes, *, source: str) -> Snapshot:
    """Parse snapshot JSON; ``SnapshotError`` names ``source`` and the offending field."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{source}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SnapshotError(f"{source}: expected a JSON object, got {type(data).__name__}")
    raw_caps = data.get("capabilities", [])
    if not isinstance(raw_caps, list):
        raise SnapshotError(f"{source}: $.capabilities: expected a list")
    caps = [_capability(c, f"$.capabilities[{i}]", source) for i, c in enumerate(raw_caps)]
    caps.sort(key=lambda c: (c.category.casefold(), c.name.casefold(), c.name))
    creds = _credentials(data.get("credentials"), source)
    canonical = json.dumps(
        {
            "capabilities": [[c.name, c.category, c.status, c.reason] for c in caps],
            "credentials": [creds.configured, list(creds.broken), creds.broken_count],
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return Snapshot(
        capabilities=tuple(caps),
        credentials=creds,
        sha256=hashlib.sha256(canonical.encode()).hexdigest(),
        source=source,
    )


def _text(value: Any, where: str, source: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SnapshotError(f"{source}: {where}: expected a non-empty string, got {value!r}")
    return " ".join(value.split())  # one line: a name cannot start a heading or a list


def _capability(raw: Any, where: str, source: str) -> Capability:
    if not isinstance(raw, dict):
        raise SnapshotError(f"{source}: {where}: expected an object")
    status_raw = raw.get("status")
    status = _STATUS_ALIASES.get(str(status_raw).lower()) if isinstance(status_raw, str) else None
    if status is None:
        raise SnapshotError(
            f"{source}: {where}.status: expected one of ready, needs_setup, broken; "
            f"got {status_raw!r}"
        )
    name = _text(raw.get("name"), f"{where}.name", source)
    category = _text(raw.get("category", "Other"), f"{where}.category", source)
    reason = _text(raw.get("reason"), f"{where}.reason", source, optional=True)
    assert name is not None and category is not None
    return Capability(name=name, category=category, status=status, reason=reason)


def _count(value: Any, where: str, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SnapshotError(f"{source}: {where}: expected a count (integer ≥ 0), got {value!r}")
    return value


def _credentials(raw: Any, source: str) -> Credentials:
    """Counts from ``{"configured": 12, "broken": ["twitter"]}`` (or ``"broken": 1``), or from a
    list of ``{"name": …, "status": "ok" | "broken", …}``; nothing else is kept."""
    if raw is None:
        return Credentials()
    if isinstance(raw, dict):
        configured = _count(raw.get("configured", 0), "$.credentials.configured", source)
        broken_raw = raw.get("broken", 0)
        if isinstance(broken_raw, list):
            names = tuple(
                sorted(
                    _text(n, f"$.credentials.broken[{i}]", source) or ""
                    for i, n in enumerate(broken_raw)
                )
            )
            return Credentials(configured=configured, broken=names, broken_count=len(names))
        count = _count(broken_raw, "$.credentials.broken", source)
        return Credentials(configured=configured, broken_count=count)
    if isinstance(raw, list):
        configured, broken = 0, []
        for i, item in enumerate(raw):
            where = f"$.credentials[{i}]"
            if not isinstance(item, dict):
                raise SnapshotError(f"{source}: {where}: expected an object")
            status = str(item.get("status", "ok")).lower()
            if status in ("broken", "error", "expired"):
                name = item.get("name", item.get("service"))
                broken.append(_text(name, f"{where}.name", source) or "")
            else:
                configured += 1
        return Credentials(
            configured=configured, broken=tuple(sorted(broken)), broken_count=len(broken)
        )
    raise SnapshotError(f"{source}: $.credentials: expected an object or a list")


def file_signature(path: Path) -> tuple[int, int, int, int]:
    """(device, inode, mtime, size) of the snapshot file, to know when it changed."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror}") from exc
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def read_snapshot_file(path: Path) -> tuple[bytes, tuple[int, int, int, int]]:
    """The snapshot file's bytes and its signature as read. ``SnapshotError`` when it is
    missing, unreadable, huge or not a regular file (a FIFO is opened without blocking and
    refused, never waited on)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotError(f"cannot read snapshot {path}: not a regular file")
        if st.st_size > MAX_SNAPSHOT_BYTES:
            raise SnapshotError(f"{path}: {st.st_size} bytes is too large for a status snapshot")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"{path}: more than {MAX_SNAPSHOT_BYTES} bytes is too large")
    return data, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def run_snapshot_command(command: Sequence[str], *, timeout: float, cwd: Path) -> bytes:
    """Run the status command (no shell) and return its standard output.

    A missing program, a non-zero exit or running past ``timeout`` seconds is a
    ``SnapshotError`` carrying the first line of its standard error.
    """
    shown = " ".join(command)
    try:
        done = subprocess.run(
            list(command),
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise SnapshotError(f"command {shown!r}: program not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise SnapshotError(f"command {shown!r} timed out after {timeout:g}s") from exc
    except OSError as exc:
        raise SnapshotError(f"command {shown!r} could not run: {exc.strerror}") from exc
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = f": {err[0]}" if err else ""
        raise SnapshotError(f"command {shown!r} exited with status {done.returncode}{detail}")
    if len(done.stdout) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"command {shown!r} printed more than {MAX_SNAPSHOT_BYTES} bytes")
    return done.stdout

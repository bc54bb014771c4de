"""Reading workspace files as text: never outside the root, never binary, never more than needed.

Files are opened through ``beneath`` (no component may lead outside the root, even while the
path changes); a file is refused when it is not a regular file, holds a NUL byte or is not
UTF-8. Large files are read only as far as their truncation strategy needs: the head, the
tail, or both.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import threading
from pathlib import Path
from typing import BinaryIO

from attrs import frozen

from lamina import plural
from lamina_workspace.beneath import FileRefused, open_regular

#: How much of a file is sniffed for NUL bytes before it is read.
SNIFF_BYTES = 8192
HEAD_MARKER = "[… {n} more {lines} not shown …]"
TAIL_MARKER = "[… {n} earlier {lines} not shown …]"
PARTIAL_HEAD = "[… rest of the file ({size} bytes in all) not read …]"
PARTIAL_TAIL = "[… start of the file ({size} bytes in all) not read …]"
PARTIAL_MIDDLE = "[… middle of the file ({size} bytes in all) not read …]"


@frozen(kw_only=True)
class FileText:
    """Text read from a file: whether only part was read, and how big the file is.
    ``uncut`` is the text as read before ``max_lines`` cut it (``None`` when it did not)."""

    text: str
    size: int
    partial: bool = False
    lines_omitted: int = 0
    sha256: str = ""
    uncut: str | None = None


def _decode(data: bytes, shown: str, *, head_cut: bool, tail_cut: bool) -> str:
    """Strict UTF-8, after dropping a character split by a cut at either end."""
    if b"\x00" in data:
        raise FileRefused(shown, "binary file (it contains NUL bytes)")
    if tail_cut:  # the data starts mid-file: skip continuation bytes of a split character
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        data = data[skip:]
    try:
        if head_cut:  # the data ends mid-file: leave out an incomplete last character
            return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=False)
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(shown, "not UTF-8 text (binary?)") from exc


def read_text(
    root: Path,
    path: str,
    *,
    strategy: str = "never",
    max_bytes: int | None = None,
    max_lines: int | None = None,
) -> FileText:
    """Read the text file ``path`` beneath ``root``, at most ``max_bytes`` of it, keeping the
    part ``strategy`` keeps (``end``: the head, ``start``: the tail, ``middle``: both);
    ``max_lines`` then limits the lines the same way. ``never`` refuses a file it would have
    to cut."""
    fd, st = open_regular(root, path)
    return read_open(
        fd, st.st_size, shown=path, strategy=strategy, max_bytes=max_bytes, max_lines=max_lines
    )


def read_open(
    fd: int,
    size: int,
    *,
    shown: str,
    strategy: str = "never",
    max_bytes: int | None = None,
    max_lines: int | None = None,
) -> FileText:
    """``read_text`` for a descriptor already opened (and closed here); ``size`` is its size
    when opened. A file that shrinks while it is read is read as far as it goes."""
    try:
        with os.fdopen(fd, "rb") as f:
            sniff = f.read(min(size, SNIFF_BYTES))
            if b"\x00" in sniff:
                raise FileRefused(shown, "binary file (it contains NUL bytes)")
            if max_bytes is None or size <= max_bytes:
                f.seek(0)
                data = f.read(size)  # not more than it held when opened
                text = _decode(data, shown, head_cut=False, tail_cut=False)
                partial = False
            elif strategy == "never":
                raise FileRefused(
                    shown,
                    f"{size} bytes is more than the {max_bytes} that could fit, and its "
                    "truncate_strategy is never",
                )
            else:
                text = _read_part(f, size, max_bytes, strategy, shown)
                partial = True
    except OSError as exc:
        raise FileRefused(shown, f"cannot read: {exc.strerror}") from exc
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    cut, omitted = _limit_lines(text, max_lines, strategy, shown)
    return FileText(
        text=cut,
        size=size,
        partial=partial,
        lines_omitted=omitted,
        sha256=digest,
        uncut=text if omitted else None,
    )


def _read_part(f: BinaryIO, size: int, max_bytes: int, strategy: str, shown: str) -> str:
    if strategy == "end":
        f.seek(0)
        head = _decode(f.read(max_bytes), shown, head_cut=True, tail_cut=False)
        head = head[: head.rfind("\n") + 1] if "\n" in head else head
        return head + PARTIAL_HEAD.format(size=size)
    if strategy == "start":
        f.seek(size - max_bytes)
        tail = _decode(f.read(max_bytes), shown, head_cut=False, tail_cut=True)
        tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
        return PARTIAL_TAIL.format(size=size) + "\n" + tail
    half = max(1, max_bytes // 2)
    f.seek(0)
    head = _decode(f.read(half), shown, head_cut=True, tail_cut=False)
    head = head[: head.rfind("\n") + 1] if "\n" in head else head
    f.seek(size - half)
    tail = _decode(f.read(half), shown, head_cut=False, tail_cut=True)
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    return head + PARTIAL_MIDDLE.format(size=size) + "\n" + tail


def _limit_lines(text: str, max_lines: int | None, strategy: str, shown: str) -> tuple[str, int]:
    if max_lines is None:
        return text, 0
    lines = text.splitlines(keepends=True)
    if len(lines) <= max_lines:
        return text, 0
    omitted = len(lines) - max_lines
    if strategy == "never":
        raise FileRefused(
            shown,
            f"has {len(lines)} lines, more than its max_lines ({max_lines}), and its "
            "truncate_strategy is never",
        )
    if strategy == "start":
        return TAIL_MARKER.format(n=omitted, lines=plural(omitted, "line")) + "\n" + "".join(
            lines[-max_lines:]
        ), omitted
    if strategy == "middle":
        head_n = (max_lines + 1) // 2
        tail_n = max_lines - head_n
        tail = "".join(lines[len(lines) - tail_n :]) if tail_n else ""
        head = "".join(lines[:head_n])
        sep = "" if head.endswith("\n") else "\n"
        return head + sep + HEAD_MARKER.format(
            n=omitted, lines=plural(omitted, "line")
        ) + "\n" + tail, omitted
    head = "".join(lines[:max_lines])
    sep = "" if head.endswith("\n") else "\n"
    return head + sep + HEAD_MARKER.format(n=omitted, lines=plural(omitted, "line")), omitted


class TextCache:
    """Whole-file reads remembered by (device, inode, mtime, size) of the file as opened, so
    unchanged workspace files are not re-read every turn."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], tuple[tuple[int, ...], FileText]] = {}

    def read(self, root: Path, path: str, *, max_bytes: int) -> FileText:
        """The text of ``path`` beneath ``root`` (``FileRefused`` over ``max_bytes``)."""
        fd, st = open_regular(root, path)
        key = (str(root), path)
        signature = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            known = self._seen.get(key)
        if known is not None and known[0] == signature:
            os.close(fd)
            return known[1]
        if st.st_size > max_bytes:
            os.close(fd)
            raise FileRefused(
                path, f"{st.st_size} bytes is more than the {max_bytes} allowed for it"
            )
        text = read_open(fd, st.st_size, shown=path)
        with self._lock:
            self._seen[key] = (signature, text)
        return text

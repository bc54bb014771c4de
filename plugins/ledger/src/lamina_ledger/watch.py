"""Whether anything was committed to an SQLite ledger since a moment this process marked,
answered without a transaction.

A ledger in WAL mode has a wal-index beside it (the ``-shm`` file), shared by every
connection. It begins with a header, kept in two copies, that each commit rewrites (its change
counter and last frame move) and that each restart of the log rewrites too (new salts); a
checkpoint leaves it as it is, as it leaves the data. So while the header reads the same as
at the mark, nobody committed anything: what was read after the mark is still current. The
layout is the one SQLite documents for its unix and Windows file systems
(https://www.sqlite.org/walformat.html, "The WAL-Index Header"); connections of different
SQLite versions share it, so it does not change under a running ledger.

The check compares 96 bytes. Reading a header that is being rewritten shows two
copies that differ, and an unknown version or an uninitialized header reads as no mark: the
caller then asks the database as before. Checking the session's version costs a read
transaction (about 0.1 ms on the first request after other work, its caches cold); this is
what spares it between writes. PostgreSQL ledgers, ``file:`` URIs and databases not in WAL
mode have no watch.
"""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

#: The two header copies (48 bytes each) at the start of the wal-index.
_HEADER = 96
#: ``iVersion`` of the wal-index header SQLite has written since 3.7.0, in native byte order.
_VERSION = (3007000).to_bytes(4, sys.byteorder)
#: Offset of ``isInit`` (1 once the header is valid).
_IS_INIT = 12


class CommitWatch:
    """Marks of the wal-index header of the SQLite database at ``path`` (see the module),
    read from a read-only mapping of the ``-shm`` file: checking a mark makes no system call
    (reading the file instead, a ``stat`` and a ``pread``, took about 0.03 ms on a request's
    cold caches here).

    The mapping is safe while the connection that owns the watch is open: SQLite truncates
    the wal-index only when no connection is using it, and a read-write connection in WAL
    mode holds it from its first read until it closes. So only a read-write connection gets
    a watch, and ``close`` unmaps it before the connection closes."""

    __slots__ = ("_file", "_map", "_shm")

    def __init__(self, path: Path) -> None:
        self._shm = f"{path}-shm"
        self._map: mmap.mmap | None = None
        self._file: tuple[int, int] = (-1, -1)  # the mapped file's device and inode

    @staticmethod
    def available() -> bool:
        """Whether this platform has SQLite's unix wal-index (a shared ``-shm`` file)."""
        return os.name == "posix"

    def mark(self) -> bytes | None:
        """The header now, or ``None`` when it cannot vouch for anything (no wal-index yet,
        an unknown layout, a header being rewritten, an error reading it). The file is
        mapped again if it is not the one mapped before."""
        try:
            found = os.stat(self._shm)
            if self._map is None or (found.st_dev, found.st_ino) != self._file:
                self._remap()
        except (OSError, ValueError):
            self.close()
            return None
        header = self._map[:_HEADER] if self._map is not None else b""
        if (
            len(header) != _HEADER
            or header[:48] != header[48:]
            or header[:4] != _VERSION
            or header[_IS_INIT] != 1
        ):
            return None
        return header

    def holds(self, mark: bytes | None) -> bool:
        """Whether nothing was committed since ``mark`` was taken (``False`` for no mark)."""
        found = self._map
        return mark is not None and found is not None and found[:_HEADER] == mark

    def close(self) -> None:
        found, self._map = self._map, None
        if found is not None:
            found.close()

    def _remap(self) -> None:
        self.close()
        fd = os.open(self._shm, os.O_RDONLY)
        try:
            opened = os.fstat(fd)
            if opened.st_size < _HEADER:
                return
            self._map = mmap.mmap(fd, _HEADER, access=mmap.ACCESS_READ)
            self._file = (opened.st_dev, opened.st_ino)
        finally:
            os.close(fd)

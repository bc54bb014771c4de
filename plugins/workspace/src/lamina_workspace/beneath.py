"""Opening workspace files so that no path can lead outside the root, even while it changes.

A path is never resolved and then opened: the root directory is opened once, and each
component is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a directory
swapped for a symlink between two steps is seen as a symlink, not followed. Symlinks are
resolved here, one at a time, against the directories already opened; one that leads above
the root is refused, and so is a chain of more than ``MAX_HOPS`` (a loop).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TypeVar

from lamina import LaminaError

#: Symlinks followed (or components looked at again after they changed) before giving up.
MAX_HOPS = 40
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
#: How a file to be read is opened: never through a symlink, never blocking (a FIFO), never
#: becoming the controlling terminal (a tty).
READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _NOCTTY | _CLOEXEC
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_LOOP = "symlink loop (or a path that keeps changing) in"

T = TypeVar("T")


class FileRefused(LaminaError):
    """A path or file that may not be read into the context; ``reason`` says why."""

    exit_code = 2

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class Changed(Exception):
    """Raised by a final step when the entry it found is not what was looked at (it was
    swapped meanwhile): the walk looks at that component again."""


@lru_cache(maxsize=4096)
def check_relative(path: str) -> PurePosixPath:
    """``path`` as a relative POSIX path, or ``FileRefused`` (empty, absolute, ``..``, or with
    a control character or line break, which could add structure where the path is shown).
    Kept per path (the answer depends on the text alone): a workspace opens the same files
    on every request."""
    if not path or not path.strip():
        raise FileRefused(path, "empty or invalid path")
    if _SURROGATE.search(path):
        raise FileRefused(printable(path), "not valid text (it holds a lone surrogate)")
    if _CONTROL.search(path):
        raise FileRefused(
            printable(path), "control characters and line breaks are refused in paths"
        )
    if path.startswith("~") or PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
        raise FileRefused(path, "absolute paths are refused; give a path inside the workspace root")
    rel = PurePosixPath(path.replace("\\", "/"))
    if ".." in rel.parts:
        raise FileRefused(path, "'..' is refused: paths must stay inside the workspace root")
    return rel


def printable(path: str) -> str:
    """``path`` with control characters, line breaks and lone surrogates written as escapes,
    for messages."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), path)


def kind_of(mode: int) -> str:
    """A file type in words, for refusals."""
    for test, name in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    ):
        if test(mode):
            return name
    return "of an unknown type"


def _outside(path: str, where: str) -> FileRefused:
    """The refusal of a path that leads to ``where``, outside the root. ``where`` is resolved
    for the message only (never opened), as far as it can be while it may be changing."""
    try:
        shown = os.path.realpath(where)
    except OSError:
        shown = os.path.normpath(where)
    return FileRefused(path, f"resolves outside the workspace root (to {shown})")


def _refusal(path: str, exc: OSError, what: str = "cannot open") -> FileRefused:
    if exc.errno == errno.ENOENT:
        return FileRefused(path, "no such file")
    if exc.errno == errno.ELOOP:
        return FileRefused(path, f"{_LOOP} the path")
    return FileRefused(path, f"{what}: {exc.strerror or exc}")


@contextmanager
def opened_root(root: Path, shown: str) -> Iterator[int]:
    """The workspace root opened as a directory."""
    try:
        fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise FileRefused(shown, "no such file") from exc
        raise FileRefused(
            shown, f"cannot open the workspace root {root}: {exc.strerror or exc}"
        ) from exc
    try:
        yield fd
    finally:
        os.close(fd)


class _Walk:
    """The state of one walk: the folders opened so far (``dirs[0]`` is the root, not ours to
    close), the components still to go, and how many symlinks or retries were spent."""

    def __init__(self, root: Path, path: str, root_fd: int) -> None:
        self.root, self.path = root, path
        self.dirs = [root_fd]
        self.pending = deque(check_relative(path).parts)
        self.hops = 0

    def spend(self) -> None:
        """Count a symlink followed or a component looked at again; too many is a loop."""
        self.hops += 1
        if self.hops > MAX_HOPS:
            raise FileRefused(self.path, f"{_LOOP} the path")

    def again(self, name: str) -> None:
        """Look at ``name`` again (it changed, or a folder was just made for it)."""
        self.spend()
        self.pending.appendleft(name)

    def up(self) -> None:
        if len(self.dirs) == 1:
            raise _outside(self.path, os.path.join(self.root, self.path))
        os.close(self.dirs.pop())

    def follow(self, name: str) -> None:
        """Replace the symlink ``name`` by its target's components (an absolute target only
        when it leads back inside the root, from the root)."""
        try:
            target = os.readlink(name, dir_fd=self.dirs[-1])
        except OSError:  # no longer a symlink
            self.again(name)
            return
        self.spend()
        parts = PurePosixPath(target).parts
        if target.startswith("/"):
            # The root's real path, worked out only here: most walks follow no absolute link.
            inside = PurePosixPath(os.path.realpath(self.root)).parts
            if parts[: len(inside)] != inside:
                raise _outside(self.path, os.path.join(target, *self.pending))
            parts = parts[len(inside) :]
            while len(self.dirs) > 1:
                os.close(self.dirs.pop())
        self.pending.extendleft(reversed(parts))

    def make_dir(self, name: str) -> None:
        try:
            os.mkdir(name, 0o777, dir_fd=self.dirs[-1])
        except FileExistsError:
            pass
        except OSError as exc:
            raise _refusal(self.path, exc, "cannot create a folder") from exc
        self.again(name)

    def enter(self, name: str, mode: int) -> None:
        if not stat.S_ISDIR(mode):
            raise FileRefused(self.path, f"{name} is {kind_of(mode)}, not a folder")
        try:
            self.dirs.append(os.open(name, _DIR_FLAGS, dir_fd=self.dirs[-1]))
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                raise _refusal(self.path, exc) from exc
            self.again(name)  # swapped since it was looked at

    def close(self) -> None:
        for fd in self.dirs[1:]:
            os.close(fd)
        del self.dirs[1:]


def walk(
    root: Path,
    path: str,
    final: Callable[[int, str], T],
    *,
    make_dirs: bool = False,
) -> T:
    """Find ``path`` beneath ``root`` without ever leaving it, and return
    ``final(parent_fd, name)``: ``name`` is the last component, not a symlink when it was
    looked at (it may not exist). Missing folders are created when ``make_dirs``.

    ``final`` opens ``name`` relative to ``parent_fd`` with ``O_NOFOLLOW`` and raises
    ``Changed`` when it finds something else than was seen; the walk then looks again."""
    check_relative(path)
    with opened_root(root, path) as root_fd:
        w = _Walk(root, path, root_fd)
        try:
            while w.pending:
                name = w.pending.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    w.up()
                    continue
                try:
                    mode = os.stat(name, dir_fd=w.dirs[-1], follow_symlinks=False).st_mode
                except FileNotFoundError:
                    if w.pending and not make_dirs:
                        raise FileRefused(path, "no such file") from None
                    if w.pending:
                        w.make_dir(name)
                        continue
                    mode = 0  # the last component may be missing: ``final`` decides
                except OSError as exc:
                    raise _refusal(path, exc) from exc
                if stat.S_ISLNK(mode):
                    w.follow(name)
                elif w.pending:
                    w.enter(name, mode)
                else:
                    try:
                        return final(w.dirs[-1], name)
                    except Changed:
                        w.again(name)
            return final(w.dirs[-1], ".")  # the path names a folder (``a/.``)
        finally:
            w.close()


def open_regular(root: Path, path: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` beneath ``root``, and its status.

    FIFOs, devices, sockets and folders are refused before anything is read (a FIFO is
    opened non-blocking, and only to look at its type)."""

    def final(parent: int, name: str) -> tuple[int, os.stat_result]:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError as exc:
            raise _refusal(path, exc) from exc
        if stat.S_ISLNK(st.st_mode):
            raise Changed
        if not stat.S_ISREG(st.st_mode):  # not opened at all: a device may act on open
            raise FileRefused(path, f"not a regular file ({kind_of(st.st_mode)})")
        try:
            fd = os.open(name, READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Changed from exc
            raise _refusal(path, exc) from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FileRefused(path, f"not a regular file ({kind_of(st.st_mode)})")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd, st

    return walk(root, path, final)

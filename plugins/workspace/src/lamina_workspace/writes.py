"""Writing workspace files beneath the root, through the same walk as reading: the manifest
replaced atomically, the change log appended to, the update lock taken, none of them through
a symlink that leads outside."""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from lamina_workspace.beneath import Changed, FileRefused, kind_of, walk

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _open_existing_or_new(parent: int, name: str, path: str, flags: int) -> int:
    """Open (creating it if missing) the regular file ``name`` in ``parent``, never through a
    symlink and never blocking on a FIFO."""
    try:
        fd = os.open(
            name, flags | os.O_CREAT | _NOFOLLOW | _NONBLOCK | _CLOEXEC, 0o644, dir_fd=parent
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Changed from exc
        raise FileRefused(path, f"cannot open for writing: {exc.strerror or exc}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FileRefused(path, f"not a regular file ({kind_of(mode)})")
    os.set_blocking(fd, True)
    return fd


def replace_text(root: Path, path: str, text: str) -> None:
    """Replace ``path`` beneath ``root`` with ``text``: a temporary file beside it, written and
    synced, then renamed over it (its permissions kept), so readers see the old or new whole."""

    def final(parent: int, name: str) -> None:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            mode = 0o644
        else:
            if stat.S_ISLNK(st.st_mode):
                raise Changed
            if not stat.S_ISREG(st.st_mode):
                raise FileRefused(path, f"not a regular file ({kind_of(st.st_mode)})")
            mode = st.st_mode & 0o777
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(tmp, flags, mode, dir_fd=parent)
        except OSError as exc:
            raise FileRefused(path, f"cannot write: {exc.strerror or exc}") from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                f.write(text)
                f.flush()
                os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException as exc:
            with suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            if isinstance(exc, OSError):
                raise FileRefused(path, f"cannot write: {exc.strerror or exc}") from exc
            raise
        os.fsync(parent)

    walk(root, path, final)


def append_text(root: Path, path: str, text: str) -> None:
    """Append ``text`` to ``path`` beneath ``root`` (created, with its folders, if missing)."""

    def final(parent: int, name: str) -> None:
        fd = _open_existing_or_new(parent, name, path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, text.encode("utf-8"))
        except OSError as exc:
            raise FileRefused(path, f"cannot write: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)

    walk(root, path, final, make_dirs=True)


@contextmanager
def locked(root: Path, path: str) -> Iterator[None]:
    """An exclusive lock (POSIX ``flock``) on the file ``path`` beneath ``root``, created if
    missing, so concurrent updates serialize."""
    fd = walk(root, path, lambda parent, name: _open_existing_or_new(parent, name, path, os.O_RDWR))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock

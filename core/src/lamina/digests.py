"""sha256 for the hashes a request makes: the interpreter's own implementation for short
inputs, OpenSSL's (``hashlib``) for long ones. Both give the same digest.

A request hashes a few short texts (the event's blocks, its memo keys). OpenSSL's path
through its digest-fetching machinery is large code that a request runs once or twice, so it
is brought in from memory each time (about 300 cache lines, some 10 microseconds); the
interpreter's implementation is a fraction of that size. For long inputs OpenSSL's
hardware-accelerated code is several times faster, and its start-up cost does not matter.
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from typing import Any

#: Inputs shorter than this many bytes (or characters, for a text about to be encoded) are
#: hashed by the interpreter's implementation: up to here it is at most twice as slow warm
#: (under 2 microseconds) and far cheaper cold.
SHORT = 1024
#: The same for a hash object kept and fed again on later requests (a stable prefix's): what
#: its implementation costs is paid on every request, its first input only once.
KEPT = 64 * 1024


def _builtin() -> Callable[..., Any]:
    """The interpreter's own sha256 (``_sha256`` up to CPython 3.11, ``_sha2`` after), else
    hashlib's."""
    for module in ("_sha256", "_sha2"):
        try:
            found: Callable[..., Any] = importlib.import_module(module).sha256
        except (ImportError, AttributeError):
            continue
        return found
    return hashlib.sha256


_short = _builtin()


def sha256(data: bytes = b"", size: int | None = None, short: int = SHORT) -> Any:
    """A sha256 hash object fed ``data``; ``size``: the whole input's length when more is fed
    afterwards (default: ``data`` 's); ``short``: below which size the interpreter's
    implementation is used."""
    if (len(data) if size is None else size) < short:
        return _short(data)
    return hashlib.sha256(data)

"""One BLAS thread while embedding and scoring vectors: OpenBLAS's default thread pool spins on a
busy host (a single query embedding took hundreds of milliseconds), and these products are small.

The limit is process-wide (BLAS has no per-thread setting), so it is taken by the first caller
and restored by the last one to leave (``threadpoolctl``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_depth = 0
_limiter: Any = None
_controller: Any = None


def _take_control() -> None:
    """threadpoolctl lets one Python thread at a time set OpenBLAS's (process-wide) limit; the
    embedding runs in whichever thread asks, so that thread takes control for the block."""
    import threadpoolctl  # type: ignore[import-untyped]

    clear = getattr(threadpoolctl.OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


def _limit() -> Any:
    global _controller
    import numpy  # noqa: F401  (BLAS is loaded with numpy: the controller must see it)
    from threadpoolctl import ThreadpoolController

    if _controller is None:
        _controller = ThreadpoolController()
    _take_control()
    return _controller.limit(limits=1, user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS runs on one thread inside the block (nested and concurrent blocks share it)."""
    global _depth, _limiter
    with _lock:
        if _depth == 0:
            _limiter = _limit()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _limiter is not None:
                _take_control()  # the thread leaving last may not be the one that entered
                _limiter.restore_original_limits()
                _limiter = None
                _take_control()  # and leaves the control to whoever asks next

"""The threads layer providers run on.

A provider may hang (a network call without a timeout). The assembly moves on without it, but
its thread cannot be killed, so the pool (a) runs calls on daemon threads, so nothing waits
for a hung call at exit, (b) grows when its workers are stuck, so a hung provider never
starves the others, and (c) counts each provider's calls still running past their time limit
and refuses new calls to a provider that already has ``max_stuck`` of them, so hung calls
cannot pile up without bound.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_IDLE_SECONDS = 60.0


class ProviderPool:
    """Daemon worker threads, started on demand and retired after a minute idle."""

    def __init__(self, *, max_stuck: int = 2, name: str = "lamina-provider") -> None:
        self.max_stuck = max_stuck
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0
        self._queued = 0
        self._workers = 0
        self._stuck: Counter[str] = Counter()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` on a worker; a new worker starts when none is free."""
        future: Future[Any] = Future()
        with self._lock:
            self._queued += 1
            if self._queued > self._idle:
                self._workers += 1
                self._idle += 1
                threading.Thread(
                    target=self._work, name=f"{self._name}-{self._workers}", daemon=True
                ).start()
        self._tasks.put((future, fn))
        return future

    def stuck(self, key: str) -> int:
        """How many of ``key`` 's calls are still running past their time limit."""
        with self._lock:
            return self._stuck[key]

    def overdue(self, key: str, future: Future[Any]) -> None:
        """``future`` (a call for ``key``) ran past its limit: count it until it ends."""
        with self._lock:
            self._stuck[key] += 1

        def ended(_: Future[Any]) -> None:
            with self._lock:
                self._stuck[key] -= 1

        future.add_done_callback(ended)

    def close(self) -> None:
        """Let idle workers go (running ones end with their call)."""
        with self._lock:
            idle = self._idle
        for _ in range(idle):
            self._tasks.put(None)

    def _work(self) -> None:
        while True:
            try:
                task = self._tasks.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._queued >= self._idle:  # a queued call is counting on this worker
                        continue
                task = None
            with self._lock:
                self._idle -= 1
                if task is None:
                    self._workers -= 1
                    return
                self._queued -= 1
            future, fn = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to whoever waits on the future
                    future.set_exception(exc)
            with self._lock:
                self._idle += 1

"""Diagnostics and progress: the ``lamina`` logger tree and a progress line for long CLI work.

The library only emits records (under ``lamina``: ``lamina.plugins``, ``lamina.assembly``, …)
and never configures handlers, so a host routes them like any other library's; the command line
sends them to standard error (``--log-level``, ``LAMINA_LOG_LEVEL``).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import IO, TypeVar

ROOT = "lamina"
ENV_LEVEL = "LAMINA_LOG_LEVEL"
LEVELS = ("debug", "info", "warning", "error", "critical")
DEFAULT_LEVEL = "warning"

T = TypeVar("T")

# A library adds only a NullHandler: records go nowhere until the host configures logging.
logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(name: str = "") -> logging.Logger:
    """The ``lamina`` logger, or its child ``lamina.<name>`` (``plugins``, ``assembly``, …)."""
    return logging.getLogger(f"{ROOT}.{name}" if name else ROOT)


class _StderrHandler(logging.Handler):
    """One line per record on the *current* ``sys.stderr`` (looked up at each record, so a
    test runner that swaps the stream gets the lines); tracebacks only at debug level."""

    def __init__(self, level: int, stream: IO[str] | None = None) -> None:
        super().__init__(level)
        self._stream = stream

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = f"lamina: {record.levelname.lower()}: {record.getMessage()}"
            if self.level <= logging.DEBUG:
                line += f" [{record.name}]"
                if record.exc_info:
                    line += "\n" + logging.Formatter().formatException(record.exc_info)
            stream = self._stream if self._stream is not None else sys.stderr
            stream.write(line + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def configure_cli(level: str = DEFAULT_LEVEL, stream: IO[str] | None = None) -> Callable[[], None]:
    """For the command line only: records of ``lamina`` at ``level`` and above go to standard
    error, one line each. Returns the undo (the CLI calls it when the command ends, so an
    in-process caller such as a test runner is left as it was)."""
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; known: {', '.join(LEVELS)}")
    number = getattr(logging, level.upper())
    root = get_logger()
    for old in [h for h in root.handlers if isinstance(h, _StderrHandler)]:
        root.removeHandler(old)
    handler = _StderrHandler(number, stream)
    previous = root.level
    root.addHandler(handler)
    root.setLevel(number)

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(previous)

    return undo


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """A one-line counter for long CLI work: ``lamina: LABEL: 1,200 of 5,000 UNIT, 310/s``,
    redrawn in place on a terminal and silent otherwise (a pipe, a file, CI), so scripted
    output stays clean. Use as a context manager; ``advance`` or ``iterate`` as work is done,
    or ``update`` with absolute counts when the work reports its own state.

    The rate is of ``unit`` done since ``start`` (a resumed job's earlier work is not this
    run's), or with ``rate_unit`` of a second count (``rated``: embeddings per second while
    memories are counted). ``show`` forces the line on or off (default: whether the stream is
    a terminal). ``clock`` and ``interval`` (the fewest seconds between redraws) exist for
    tests.
    """

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        unit: str = "items",
        rate_unit: str | None = None,
        start: int = 0,
        show: bool | None = None,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = 0.2,
    ) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.rate_unit = rate_unit
        self.stream = stream if stream is not None else sys.stderr
        self.shown = _is_terminal(self.stream) if show is None else show
        self.done = self.start = start
        self.rated = 0
        self._clock = clock
        self._interval = interval
        self._started = clock()
        self._drawn_at: float | None = None
        self._width = 0
        self._closed = False

    def advance(self, n: int = 1, *, rated: int = 0) -> None:
        """Count ``n`` more items done and ``rated`` more of the rated count (redrawn at most
        every ``interval`` seconds)."""
        self.done += n
        self.rated += rated
        self._redraw()

    def update(self, done: int, *, rated: int | None = None, total: int | None = None) -> None:
        """Set the counts (and the total, once known) to where the work says it is."""
        self.done = done
        if rated is not None:
            self.rated = rated
        if total is not None:
            self.total = total
        self._redraw()

    def _redraw(self) -> None:
        if not self.shown:
            return
        now = self._clock()
        if self._drawn_at is None or now - self._drawn_at >= self._interval:
            self._draw(now, end="")

    def iterate(self, items: Iterable[T]) -> Iterator[T]:
        """Yield ``items``, counting each one after the caller has handled it."""
        for item in items:
            yield item
            self.advance()

    def line(self, now: float | None = None) -> str:
        """The text shown: items done (of the total, if known) and the rate so far."""
        elapsed = (self._clock() if now is None else now) - self._started
        count = f"{self.done:,}" if self.total is None else f"{self.done:,} of {self.total:,}"
        if self.rate_unit is None:
            rate = f", {(self.done - self.start) / elapsed:,.1f}/s" if elapsed > 0 else ""
        else:
            shown = elapsed > 0 and self.rated
            rate = f", {self.rated / elapsed:,.1f} {self.rate_unit}/s" if shown else ""
        return f"lamina: {self.label}: {count} {self.unit}{rate}"

    def close(self) -> None:
        """Draw the final count and end the line (on a terminal); log a summary at debug."""
        if self._closed:
            return
        self._closed = True
        now = self._clock()
        if self.shown:
            self._draw(now, end="\n")
        get_logger("progress").debug(
            "%s: %d %s in %.2fs", self.label, self.done - self.start, self.unit, now - self._started
        )

    def _draw(self, now: float, *, end: str) -> None:
        text = self.line(now)
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write(f"\r{text}{pad}{end}")
        self.stream.flush()
        self._drawn_at = now

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def progress(
    label: str,
    *,
    total: int | None = None,
    unit: str = "items",
    rate_unit: str | None = None,
    start: int = 0,
    show: bool | None = None,
) -> Progress:
    """A ``Progress`` on standard error: ``with progress("memory import", total=n) as p:``
    (shown only when standard error is a terminal, unless ``show`` says otherwise)."""
    return Progress(label, total=total, unit=unit, rate_unit=rate_unit, start=start, show=show)

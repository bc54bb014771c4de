"""Errors as one shape: ``application/problem+json`` (RFC 9457) with the kernel's fields.

The kernel's taxonomy maps to statuses: bad requests and config 400 (naming the key), an
unmeetable budget 422 (with the overage), a session the store does not know 404, a plugin or
provider that failed 500 (naming the plugin). Nothing else reaches a client: an unexpected
error is a 500 that names its type, never a traceback.
"""

from __future__ import annotations

from attrs import evolve

from lamina.errors import (
    BudgetError,
    ConfigError,
    LaminaError,
    PluginError,
    ProviderError,
    SerdeError,
)
from lamina.serve.wire import Problem

MEDIA_TYPE = "application/problem+json"
#: Each problem's ``type``: a URI naming the kind, documented in docs/serve.md.
BASE = "urn:lamina:problem:"


def problem(status: int, kind: str, title: str, detail: str, **fields: object) -> Problem:
    """A problem of ``kind`` (the last part of its ``type`` URI)."""
    return Problem(type=BASE + kind, title=title, status=status, detail=detail, **fields)  # type: ignore[arg-type]


def from_exception(exc: BaseException, *, plugin: str | None = None) -> Problem:
    """The problem for an exception raised while serving; ``plugin`` names the plugin the
    call went to (a session store) when the error does not name one itself."""
    if isinstance(exc, SerdeError):
        return problem(
            400,
            "invalid-request",
            "Invalid request",
            str(exc),
            errors=tuple(exc.errors),
            file=exc.file,
        )
    if isinstance(exc, ConfigError):
        return problem(
            400,
            "config",
            "Bad request or config",
            str(exc),
            key=exc.key,
            file=exc.file,
            plugin=exc.plugin,
        )
    if isinstance(exc, BudgetError):
        return problem(
            422,
            "budget",
            "The budget cannot be met",
            str(exc),
            overage=exc.overage,
            available=exc.available,
        )
    if isinstance(exc, LookupError) and not isinstance(exc, KeyError | IndexError):
        # the store contract's "no such session" (a KeyError is a bug, not a lookup)
        detail = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        return problem(404, "not-found", "No such session", detail, plugin=plugin)
    if isinstance(exc, PluginError):
        kind = "provider" if isinstance(exc, ProviderError) else "plugin"
        return problem(500, kind, "A plugin failed", str(exc), plugin=exc.plugin or plugin or None)
    if isinstance(exc, LaminaError):
        found = problem(500, "plugin", "A plugin failed", str(exc), plugin=plugin)
        return found if plugin is not None else evolve(found, type=BASE + "internal")
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if plugin is not None:
        return problem(
            500, "plugin", "A plugin failed", f"plugin {plugin!r}: {what}", plugin=plugin
        )
    return problem(500, "internal", "Internal error", what)

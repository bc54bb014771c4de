"""Who may talk to the service.

- It listens on loopback unless told otherwise; any other address needs a bearer token (from
  ``--token-file`` or ``LAMINA_SERVE_TOKEN``), or it refuses to start.
- With a token, every request must carry ``Authorization: Bearer <token>`` (compared in
  constant time), else 401.
- Without one (loopback only), the ``Host`` header must name a loopback host, so a web page
  that rebinds its own domain to 127.0.0.1 cannot reach the service from a browser; POST
  bodies must be JSON, which a cross-site form or simple request cannot send.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from lamina.errors import ConfigError
from lamina.serde import unstructure
from lamina.serve.problems import MEDIA_TYPE, problem

ENV_TOKEN = "LAMINA_SERVE_TOKEN"
#: The shortest token accepted: anything shorter is guessable.
MIN_TOKEN = 16

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def load_token(
    token_file: str | None, environ: MutableMapping[str, str] | None = None
) -> str | None:
    """The bearer token from ``token_file`` (first), else ``LAMINA_SERVE_TOKEN``, else none."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        try:
            text = Path(token_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"cannot read the token file: {exc.strerror if isinstance(exc, OSError) else exc}",
                file=token_file,
            ) from exc
        return _valid(text.strip(), f"the token file {token_file}")
    raw = env.get(ENV_TOKEN)
    if raw is None or not raw.strip():
        return None
    return _valid(raw.strip(), ENV_TOKEN)


def _valid(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN:
        raise ConfigError(f"{where}: the token must be at least {MIN_TOKEN} characters")
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        raise ConfigError(f"{where}: the token must be printable ASCII without spaces")
    return token


def require_token_off_loopback(host: str, token: str | None) -> None:
    """Refuse to listen on a non-loopback ``host`` without a token."""
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without a bearer token: give --token-file PATH or "
            f"set {ENV_TOKEN} (clients then send 'Authorization: Bearer <token>'), or listen "
            "on 127.0.0.1"
        )


async def send_problem(send: Send, status: int, kind: str, title: str, detail: str) -> None:
    """Answer with a problem (used before any route runs)."""
    data = unstructure(problem(status, kind, title, detail))
    body = json.dumps({k: v for k, v in data.items() if v is not None}).encode()
    headers = [(b"content-type", MEDIA_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="lamina"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: the bearer token when there is one, else the loopback ``Host`` rule."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        if self.expected is not None:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                detail = "a bearer token is required" if not given else "wrong bearer token"
                await send_problem(send, 401, "unauthorized", "Unauthorized", detail)
                return
        elif not _loopback_host(headers.get(b"host", b"")):
            await send_problem(
                send,
                403,
                "forbidden-host",
                "Forbidden host",
                "without a token the service answers only requests for a loopback host "
                "(127.0.0.1, ::1, localhost)",
            )
            return
        await self.app(scope, receive, send)


def _loopback_host(raw: bytes) -> bool:
    host = raw.decode("latin-1").strip()
    if host.startswith("["):  # [::1]:8642
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return bool(host) and is_loopback(host)

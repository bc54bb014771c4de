"""A provider's HTTP API played back on loopback, for testing an adapter's ``send`` with the
real SDK over a real socket and no network.

``WireServer`` listens on ``127.0.0.1`` (a free port) in a thread of its own, records every
request (method, path, headers, JSON body) and answers each with the next scripted
``Answer`` (the last one again once the script is used up), so a test checks both what the
SDK put on the wire and how the adapter reads what the provider sends back::

    with WireServer(Answer(body=recorded_reply)) as server:
        adapter = ...  # base_url = server.url
        result = adapter.send(context, {})
    assert server.requests[0].body == adapter.build_request(context, {})
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from attrs import field, frozen

__all__ = ["Answer", "Received", "WireServer"]


@frozen(kw_only=True)
class Received:
    """One request the server got: ``body`` is its JSON (``None`` when it had none)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@frozen(kw_only=True)
class Answer:
    """One scripted response: a status, a JSON body (or raw ``text``) and headers."""

    status: int = 200
    body: Any = None
    text: str | None = None
    headers: dict[str, str] = field(factory=dict)

    def payload(self) -> bytes:
        if self.text is not None:
            return self.text.encode()
        return json.dumps(self.body if self.body is not None else {}).encode()


Script = Answer | Callable[[Received], Answer]


class WireServer:
    """An HTTP server on loopback answering from a script and recording what it received.

    ``answers`` are played in order (each an ``Answer``, or a function of the request that
    returns one); ``add`` appends more. ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, *answers: Script) -> None:
        self.requests: list[Received] = []
        self._script: list[Script] = list(answers)
        self._played = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *answers: Script) -> None:
        """Append answers to the script."""
        with self._lock:
            self._script.extend(answers)

    def answer(self, received: Received) -> Answer:
        """Record ``received`` and pick the script's next answer for it."""
        with self._lock:
            self.requests.append(received)
            if not self._script:
                return Answer(status=500, body={"error": {"message": "no scripted answer"}})
            step = self._script[min(self._played, len(self._script) - 1)]
            self._played += 1
        return step(received) if callable(step) else step

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> WireServer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _handler(server: WireServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            received = Received(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=json.loads(raw) if raw else None,
            )
            answer = server.answer(received)
            data = answer.payload()
            self.send_response(answer.status)
            headers: Mapping[str, str] = {"content-type": "application/json", **answer.headers}
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_GET = do_PUT = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler

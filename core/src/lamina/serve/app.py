"""The ASGI application (Starlette): routes, JSON bodies within a size limit, problem
responses for every error, and the service's life (closed on shutdown)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.errors import ConfigError, SerdeError
from lamina.html.shell import CSP
from lamina.model.result import AgentResult
from lamina.schema import json_schema
from lamina.serde import structure, unstructure
from lamina.serve.encode import ContextEncoder
from lamina.serve.openapi import openapi_document
from lamina.serve.problems import MEDIA_TYPE, from_exception, problem
from lamina.serve.security import Guard
from lamina.serve.service import Service
from lamina.serve.tools_memo import DecodedTools
from lamina.serve.wire import CompactionInput, Problem

T = TypeVar("T")
#: The largest request body accepted by default (bytes): a long host-supplied history fits.
MAX_BODY = 8 * 1024 * 1024

log = logging.getLogger("lamina.serve")


class BodyTooLarge(Exception):
    """A request body over the limit."""


def problem_response(found: Problem, headers: dict[str, str] | None = None) -> Response:
    """The problem as ``application/problem+json``, without its empty fields."""
    data = {k: v for k, v in unstructure(found).items() if v is not None}
    body = json.dumps(data, ensure_ascii=False).encode()
    return Response(body, status_code=found.status, media_type=MEDIA_TYPE, headers=headers)


JSON = "application/json"


def ok(data: Any, status: int = 200) -> Response:
    """``data`` (model objects) as JSON, UTF-8 kept as is."""
    return Response(dumps(unstructure(data)), status_code=status, media_type=JSON)


def page(text: str) -> Response:
    """An HTML page, told to load nothing (its Content-Security-Policy, also as a header)."""
    headers = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}
    return Response(text.encode(), media_type="text/html; charset=utf-8", headers=headers)


def view(request: Request) -> str:
    """The ``format`` query parameter: ``json`` (the default) or ``html`` (a page)."""
    found = request.query_params.get("format", "json")
    if found not in ("json", "html"):
        raise ConfigError(f"format must be 'json' or 'html', got {found!r}", key="format")
    return found


def flag(request: Request, name: str) -> bool:
    """A boolean query parameter (``true``/``false``, ``1``/``0``; absent is false)."""
    found = request.query_params.get(name, "false").lower()
    if found not in ("true", "false", "1", "0"):
        raise ConfigError(f"{name} must be true or false, got {found!r}", key=name)
    return found in ("true", "1")


def _dumps(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


try:  # orjson (the serve extra) writes a large context several times faster
    import orjson

    def dumps(data: Any) -> bytes:
        """Compact UTF-8 JSON (orjson; the standard library for what it refuses)."""
        try:
            return orjson.dumps(data)
        except TypeError:  # an integer beyond 64 bits, say
            return _dumps(data)

except ImportError:  # pragma: no cover - without the extra
    dumps = _dumps


async def read_json(request: Request, limit: int) -> Any:
    """The request's JSON body, refused past ``limit`` bytes (by header or as it streams)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/json":
        raise HTTPException(415, f"send the body as application/json (got {kind or 'none'})")
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limit):
        raise BodyTooLarge(f"the body is larger than {limit} bytes")
    if length is not None:  # the server stops at the declared length
        body = await request.body()
    else:  # chunked: count as it streams
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(f"the body is larger than {limit} bytes")
            chunks.append(chunk)
        body = b"".join(chunks)
    try:
        return json.loads(body)  # the standard library: lone surrogates are cleaned, not refused
    except ValueError as exc:  # not JSON, or not UTF-8
        raise SerdeError([f"not JSON: {exc}"], what="request body") from exc


def create_app(
    service: Service,
    *,
    token: str | None = None,
    max_body: int = MAX_BODY,
    encoder: ContextEncoder | None = None,
) -> Any:
    """The ASGI app for ``service``; ``token`` requires a bearer token on every request;
    ``encoder`` writes assembled contexts (one of its own by default)."""

    def endpoint(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except HTTPException:
                raise
            except BodyTooLarge as exc:
                return problem_response(problem(413, "too-large", "Body too large", str(exc)))
            except Exception as exc:
                found = from_exception(exc)
                if found.status >= 500:
                    log.error("%s %s: %s", request.method, request.url.path, found.detail)
                return problem_response(found)

        return run

    encoder = encoder or ContextEncoder(dumps)
    decoded_tools = DecodedTools(dumps)

    async def body(request: Request, cls: type[T]) -> T:
        return structure(await read_json(request, max_body), cls, what=cls.__name__)

    async def health(_request: Request) -> Response:
        return ok(service.health())

    async def plugins(_request: Request) -> Response:
        return ok(service.plugins())

    async def assemble(request: Request) -> Response:
        as_page = view(request) == "html"
        ctx = await service.assemble(decoded_tools.structure(await read_json(request, max_body)))
        if as_page:
            from lamina.html import render_html

            return page(render_html(ctx))
        return Response(encoder.encode(ctx), media_type=JSON)

    async def turns(request: Request) -> Response:
        label = request.path_params["label"]
        result = await body(request, AgentResult)
        return ok(await service.record(label, result), status=201)

    async def compact(request: Request) -> Response:
        label = request.path_params["label"]
        return ok(await service.compact(label, await body(request, CompactionInput)))

    async def stats(request: Request) -> Response:
        label = request.path_params["label"]
        as_page, per_turn = view(request) == "html", flag(request, "per_turn")
        if as_page:
            return page(await service.stats_page(label))
        if per_turn:
            return Response(dumps(dict(await service.turn_stats(label))), media_type=JSON)
        return ok(await service.stats(label))

    schema = json.dumps(json_schema(), ensure_ascii=False).encode()
    openapi = json.dumps(openapi_document(service.version), ensure_ascii=False).encode()

    async def schema_doc(_request: Request) -> Response:
        return Response(schema, media_type="application/schema+json")

    async def openapi_doc(_request: Request) -> Response:
        return Response(openapi, media_type="application/json")

    async def http_problem(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        titles = {404: "Not found", 405: "Method not allowed", 415: "Unsupported media type"}
        title = titles.get(exc.status_code, "HTTP error")
        found = problem(exc.status_code, "http", title, str(exc.detail))
        return problem_response(found, headers=dict(exc.headers or {}))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.close()

    routes = [
        Route("/v1/health", endpoint(health), methods=["GET"]),
        Route("/v1/assemble", endpoint(assemble), methods=["POST"]),
        Route("/v1/sessions/{label}/turns", endpoint(turns), methods=["POST"]),
        Route("/v1/sessions/{label}/compact", endpoint(compact), methods=["POST"]),
        Route("/v1/sessions/{label}/stats", endpoint(stats), methods=["GET"]),
        Route("/v1/plugins", endpoint(plugins), methods=["GET"]),
        Route("/v1/schema", schema_doc, methods=["GET"]),
        Route("/openapi.json", openapi_doc, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes, exception_handlers={HTTPException: http_problem}, lifespan=lifespan
    )
    return Guard(app, token)


def configure_logging() -> None:
    """Errors the service answers with 500 go to standard error, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("lamina serve: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False

"""The OpenAPI 3.1 document (``/openapi.json``): the endpoints, with bodies and replies taken
from the one JSON Schema (``/v1/schema``; its ``$defs`` are the document's components)."""

from __future__ import annotations

import json
from typing import Any

from lamina.schema import SCHEMA_ID, json_schema

_PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
_LABEL = {
    "name": "label",
    "in": "path",
    "required": True,
    "description": "The session label: 1-128 letters, digits, '.', '_' or '-'.",
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
}
_FORMAT = {
    "name": "format",
    "in": "query",
    "required": False,
    "description": "json (the default) or html: one self-contained page (no script, no "
    "network) instead of the JSON.",
    "schema": {"type": "string", "enum": ["json", "html"], "default": "json"},
}
_PER_TURN = {
    "name": "per_turn",
    "in": "query",
    "required": False,
    "description": "true: the statistics turn by turn (usage, cost, stable prefix, cache "
    "busts, compactions), as `lamina ledger stats --per-turn --json` prints them.",
    "schema": {"type": "boolean", "default": False},
}
_HTML = {"text/html": {"schema": {"type": "string"}}}


def components() -> dict[str, Any]:
    """The schema's ``$defs`` with references pointing into the OpenAPI components."""
    text = json.dumps(json_schema()["$defs"])
    return dict(json.loads(text.replace('"#/$defs/', '"#/components/schemas/')))


def _json(name: str, array: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"$ref": f"#/components/schemas/{name}"}
    schema = {"type": "array", "items": ref} if array else ref
    return {"application/json": {"schema": schema}}


def _op(
    summary: str,
    reply: str,
    *,
    status: str = "200",
    body: str | None = None,
    label: bool = False,
    errors: tuple[str, ...] = ("400", "401", "500"),
    array: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary}
    if label:
        op["parameters"] = [_LABEL]
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(body)}
    responses: dict[str, Any] = {status: {"description": reply, "content": _json(reply, array)}}
    for code in errors:
        responses[code] = {"description": _ERRORS[code], "content": _PROBLEM}
    op["responses"] = responses
    return op


_ERRORS = {
    "400": "Bad request or config (names the key)",
    "401": "A bearer token is required (when the service has one)",
    "404": "No such session",
    "413": "The body is over the size limit",
    "415": "The body is not application/json",
    "422": "The budget cannot be met (with the overage)",
    "500": "A plugin failed (names it)",
}
_BODY_ERRORS = ("400", "401", "413", "415", "500")


def _paged(op: dict[str, Any], *params: dict[str, Any]) -> dict[str, Any]:
    """``op`` with query ``params`` and an HTML page as another 200 reply."""
    op["parameters"] = [*op.get("parameters", []), *params]
    op["responses"]["200"]["content"].update(_HTML)
    if any(p["name"] == "per_turn" for p in params):
        op["responses"]["200"]["content"]["application/json"]["schema"] = {
            "oneOf": [
                op["responses"]["200"]["content"]["application/json"]["schema"],
                {"type": "object", "description": "per_turn=true: {session, totals, turns}"},
            ]
        }
    return op


def openapi_document(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the service."""
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "lamina serve",
            "version": version or "0",
            "description": "Lamina as an HTTP/JSON service: assemble each turn's context, record "
            "the agent's result, compact and total sessions. The components are the $defs of "
            f"the JSON Schema served at /v1/schema ({SCHEMA_ID}).",
        },
        "externalDocs": {"description": "The JSON Schema of the wire types", "url": "/v1/schema"},
        "components": {
            "schemas": components(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}, {}],
        "paths": {
            "/v1/health": {"get": _op("Liveness and what the service runs", "Health")},
            "/v1/assemble": {
                "post": _paged(
                    _op(
                        "Assemble one turn's context (the stored session's history unless the "
                        "request brings its own); format=html: the report as a page",
                        "AssembledContext",
                        body="AssemblyInput",
                        errors=(*_BODY_ERRORS, "422"),
                    ),
                    _FORMAT,
                )
            },
            "/v1/sessions/{label}/turns": {
                "post": _op(
                    "Record a finished turn (messages, tool calls and results, usage)",
                    "TurnRecorded",
                    status="201",
                    body="AgentResult",
                    label=True,
                    errors=_BODY_ERRORS,
                )
            },
            "/v1/sessions/{label}/compact": {
                "post": _op(
                    "Compact the session now",
                    "CompactionOutcome",
                    body="CompactionInput",
                    label=True,
                    errors=(*_BODY_ERRORS, "404", "422"),
                )
            },
            "/v1/sessions/{label}/stats": {
                "get": _paged(
                    _op(
                        "Turns, compactions and the tokens the provider reported; per_turn: "
                        "turn by turn; format=html: as a page with charts",
                        "SessionStats",
                        label=True,
                        errors=("400", "401", "404", "500"),
                    ),
                    _FORMAT,
                    _PER_TURN,
                )
            },
            "/v1/plugins": {"get": _op("The plugins loaded", "PluginInfo", array=True)},
        },
    }

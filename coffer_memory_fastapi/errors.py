"""The one error envelope and the mapping from core error codes to HTTP statuses."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from coffer_memory import CofferError

from .schemas import ErrorOut

log = logging.getLogger("coffer_memory_fastapi")

STATUS: dict[str, int] = {
    "MEMORY_STORE_NOT_FOUND": 404,
    "MEMORY_NOT_FOUND": 404,
    "OPERATION_NOT_FOUND": 404,
    "SESSION_NOT_FOUND": 404,
    "NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "MEMORY_REJECTED": 422,
    "INVALID_INPUT": 422,
    "INVALID_CURSOR": 422,
    "SCOPE_UNRESOLVED": 422,
    "MEMORY_CONFLICT": 412,
    "REQUEST_TOO_LARGE": 413,
    "AGENT_CONFIG_INVALID": 409,
    "UNAUTHORIZED": 401,
    "ORIGIN_NOT_ALLOWED": 403,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "HOST_NOT_ALLOWED": 421,
    "LLM_OUTPUT_INVALID": 502,
    "LLM_UNAVAILABLE": 503,
    "EMBEDDING_UNAVAILABLE": 503,
    "INDEX_UNAVAILABLE": 503,
    "STORAGE_NOT_WRITABLE": 503,
    "STORAGE_FULL": 507,  # Insufficient Storage: freeing space is the fix, not a server bug
    "TOO_MANY_CONNECTIONS": 503,  # answered by the protocol as a connection is made (``_http_conns``)
    "INTERNAL": 500,
}
"""HTTP status of every error code; a code not listed here is answered with 500."""

_DESCRIPTIONS: dict[int, str] = {
    401: "UNAUTHORIZED: a bearer token is configured and the request did not carry it.",
    403: "ORIGIN_NOT_ALLOWED: the request came from a web page of another origin.",
    404: "MEMORY_STORE_NOT_FOUND (invalid store name), MEMORY_NOT_FOUND (no such fact or lane file) "
    "OPERATION_NOT_FOUND or SESSION_NOT_FOUND (no such past agent session).",
    409: "AGENT_CONFIG_INVALID: an agent config file (or agents.json) does not parse; it was not written.",
    412: "MEMORY_CONFLICT: If-Match does not match the file's current sha256; nothing was written.",
    413: "REQUEST_TOO_LARGE: the request's body is larger than any valid request to the path (details.limit).",
    415: "UNSUPPORTED_MEDIA_TYPE: a POST (even with an empty body), or another request with a body, "
    "without Content-Type: application/json.",
    421: "HOST_NOT_ALLOWED: the Host header is not a loopback name, the bound address or an allowed host.",
    422: "INVALID_INPUT (request validation, unknown mode, a lone surrogate...), INVALID_CURSOR (a cursor that "
    "is malformed, not this home's, from another query or from before the store changed), MEMORY_REJECTED "
    "(empty or too long text) or SCOPE_UNRESOLVED (cwd is not in a git repository).",
    500: "INTERNAL: an unexpected failure.",
    502: "LLM_OUTPUT_INVALID: the organizer's model answered with no usable JSON.",
    503: "LLM_UNAVAILABLE or INDEX_UNAVAILABLE: the organizer's model, or a shared index backend, could not answer; "
    "STORAGE_NOT_WRITABLE: the server's process may not write the store's folder, or an agent's config "
    "file or its folder (nothing was written).",
    507: "STORAGE_FULL: the disk under the home (or under an agent's config file) is full, or a file size "
    "limit was hit; nothing was written.",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` documenting the envelope for these statuses (plus 401, 422 and 500)."""
    wanted = sorted({*statuses, 401, 422, 500})
    return {s: {"model": ErrorOut, "description": _DESCRIPTIONS[s]} for s in wanted}


def document_guard(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the request guard's refusals (403, 421; 413 and 415 where a body goes) to every operation,
    and 507 to every one that writes (a full disk)."""
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
    for item in schema.get("paths", {}).values():
        for method, operation in item.items():
            statuses = (
                (403, 413, 415, 421, 507) if method in ("post", "put", "patch", "delete") else (403, 421)
            )
            responses = operation.setdefault("responses", {})
            for status in statuses:
                responses.setdefault(str(status), {"description": _DESCRIPTIONS[status], "content": content})
    return schema


def envelope(
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """A JSON response holding ``{"error": {"code", "message", "details"}}``."""
    body = {"error": {"code": code, "message": message, "details": jsonable_encoder(details or {})}}
    return JSONResponse(body, status_code=status or STATUS.get(code, 500), headers=headers)


def coffer_envelope(exc: CofferError) -> JSONResponse:
    """The envelope answering a core error."""
    return envelope(exc.code, exc.message, exc.details)


async def _coffer_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CofferError)
    return coffer_envelope(exc)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"])
    return envelope(
        "INVALID_INPUT", f"{where}: {first['msg']}" if where else str(first["msg"]), {"errors": errors}
    )


def route_methods(routes: Iterable[object]) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    """Each route's path pattern and methods: what a 405's ``Allow`` is computed from."""
    return [(r.path_regex, frozenset(r.methods or ())) for r in routes if isinstance(r, APIRoute)]


def _allow(request: Request) -> str | None:
    """Every method the path answers to (Starlette names only the first route that matched)."""
    path, root = request.scope["path"], request.scope.get("root_path", "")
    if root and path.startswith(root + "/"):  # mounted under a prefix
        path = path[len(root) :]
    table: list[tuple[re.Pattern[str], frozenset[str]]] = getattr(request.app.state, "route_methods", [])
    methods = {m for pattern, ms in table if pattern.match(path) for m in ms}
    return ", ".join(sorted(methods)) if methods else None


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400:  # an unparsable body: the same answer as any other invalid input
        return envelope("INVALID_INPUT", str(exc.detail))
    code = {401: "UNAUTHORIZED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(
        exc.status_code, "HTTP_ERROR"
    )
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allow(request) or headers.get("Allow", "")
    return envelope(code, str(exc.detail), status=exc.status_code, headers=headers)


def unexpected_envelope(exc: Exception) -> JSONResponse:
    """The envelope answering an unexpected failure (logged here; its message never sent)."""
    log.exception("unexpected failure", exc_info=exc)
    return envelope("INTERNAL", "internal error", {"type": type(exc).__name__})


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    return unexpected_envelope(exc)


def install(app: FastAPI) -> None:
    """Answer every error (core, validation, routing, unexpected) with the envelope."""
    app.add_exception_handler(CofferError, _coffer_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)

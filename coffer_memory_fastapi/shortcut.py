"""``RecallShortcut``: a plain recall request answered without FastAPI's per-request machinery.

Recall is what agents call most. For each request FastAPI re-derives every query parameter's
type (nine parameters on ``/recall``), solves the dependencies and passes five more middleware
layers and the router: about as much CPU as the rest of the HTTP path together (docs/benchmarks.md,
"REST, session 7"). This app answers a ``GET`` of either recall route whose parameters are all
plain and within the route's limits, by calling the same ``routers.recall.found`` the routes call
and encoding its result as ``reply`` does, so the body, status and headers are the route's. Every
other request (another path or method, a mounted app, a missing, repeated, unknown or
out-of-range parameter, anything FastAPI would refuse or coerce) goes on to the app unchanged, so
each refusal stays FastAPI's own.

It sits in front of the app's whole middleware stack (``create_app`` puts it there): Starlette's
error middleware, FastAPI's and the guard's layers each wrapped every recall and its two sends
(docs/benchmarks.md, "REST recall, session 18"). So it asks ``RequestGuard`` itself: a request
the guard would refuse, or whose body the guard would read, goes on to the app, whose guard
refuses it; so does one with an ``Origin`` when CORS is on (the CORS middleware answers
it). Its answers carry the headers the guard adds to an API answer, and an unexpected
failure is answered as Starlette's error middleware answers it (the envelope, then raised on).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

import pydantic_core
from starlette.types import ASGIApp, Receive, Scope, Send

from coffer_memory import AsyncMemoryService, CofferError
from coffer_memory.vocabulary import (
    MAX_QUERY_CHARS,
    MAX_RECALL_LIMIT,
    MAX_TAG_CHARS,
    MAX_TAGS,
    RETRIEVAL_MODES,
)

from . import errors
from .guard import _API_HEADERS, RequestGuard, _adding
from .reply import JsonReply
from .routers import recall
from .routers.recall import TIME_CHARS
from .schemas import RECALL

# ``/api/v1/memory_stores/recall`` or ``.../{name}/recall`` (a path parameter matches ``[^/]+``).
_PATH = re.compile(re.escape(recall.router.prefix) + r"(?:/([^/]+))?/recall")
_LIMIT = re.compile(r"[1-9][0-9]{0,2}")  # what int() and pydantic read alike
_SCALARS = {"query", "cwd", "mode", "limit", "since", "until"}
_LISTS = {"store", "tag"}
_ON_ONE_STORE = {"query", "mode", "limit", "since", "until", "tag"}  # ``/{name}/recall`` takes no cwd, store
_JSON = (b"content-type", JsonReply.media_type.encode())


def recall_arguments(scope: Scope) -> tuple[Any, ...] | None:
    """The arguments of ``recall.answer`` for a plain recall request, or None to let FastAPI answer."""
    if scope["method"] != "GET" or scope.get("root_path"):
        return None
    found = _PATH.fullmatch(scope["path"])
    if found is None:
        return None
    name = found.group(1)
    known = _ON_ONE_STORE if name is not None else _SCALARS | _LISTS
    one: dict[str, str] = {}
    many: dict[str, list[str]] = {}
    for key, value in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True):
        if key not in known:
            return None  # FastAPI refuses a parameter its route does not take (``deps.known_query``)
        if key in _LISTS:
            many.setdefault(key, []).append(value)
        elif key in one:
            return None  # FastAPI reads the last one: rare enough to leave to it
        else:
            one[key] = value
    query = one.get("query")
    mode = one.get("mode")
    limit = one.get("limit", "10")
    since, until = one.get("since"), one.get("until")
    tags = many.get("tag")
    if (
        query is None
        or len(query) > MAX_QUERY_CHARS
        or (mode is not None and mode not in RETRIEVAL_MODES)
        or not _LIMIT.fullmatch(limit)
        or int(limit) > MAX_RECALL_LIMIT
        or (since is not None and len(since) > TIME_CHARS)
        or (until is not None and len(until) > TIME_CHARS)
        or (tags is not None and (len(tags) > MAX_TAGS or any(len(t) > MAX_TAG_CHARS for t in tags)))
    ):
        return None
    return (query, one.get("cwd"), many.get("store"), mode, int(limit), tags, since, until, name)


class RecallShortcut:
    """ASGI app answering plain recall requests itself, in front of ``app`` (see the module
    docstring); ``guard`` is configured as the app's ``RequestGuard``, ``cors``: CORS is on."""

    def __init__(self, app: ASGIApp, *, guard: RequestGuard, service: AsyncMemoryService, cors: bool) -> None:
        self.app = app
        self.guard = guard
        self.service = service
        self.cors = cors
        # What the guard adds to an API answer, after what the CORS middleware adds to one
        # answering a request without an Origin.
        self.added = (*([(b"vary", b"Origin")] if cors else []), *_API_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        args = recall_arguments(scope) if scope["type"] == "http" else None
        if args is None or not self._passes_guard(scope):
            await self.app(scope, receive, send)
            return
        *params, name = args
        try:
            result = await recall.found(self.service, *params, name=name)
        except CofferError as exc:  # what the app's handler for it answers, through the guard
            await errors.coffer_envelope(exc)(scope, receive, _adding(send, self.added))
            return
        except Exception as exc:  # Starlette's error middleware, outside the guard: answer, raise on
            await errors.unexpected_envelope(exc)(scope, receive, send)
            raise
        # ``reply(RECALL, result)`` and the headers added to it, written as the two messages they send.
        body = pydantic_core.to_json(RECALL.dump(result))
        headers = [(b"content-length", str(len(body)).encode()), _JSON, *self.added]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _passes_guard(self, scope: Scope) -> bool:
        """The guard lets the request through with no body to read and no CORS headers to add."""
        if self.cors and any(key == b"origin" for key, _ in scope["headers"]):
            return False
        refusal, reads_body = self.guard._check(scope)
        return refusal is None and not reads_body

"""``BoundedBody``: a request body to ``coffer-mcp --transport streamable-http`` is at most
``MAX_REQUEST_BODY_BYTES``.

The SDK's transport reads a POST's body whole (``await request.body()``) before it looks at it:
a body of gigabytes, or a chunked one that never ended, was taken into memory. A body declared
(``Content-Length``) or sent past the bound is ``413 REQUEST_TOO_LARGE`` with the error envelope
and ``Connection: close``; the rest is never read. A body within it is read here and handed on.

Before the body is read, its ``Content-Type`` is judged by ``coffer-api``'s rule
(``coffer_memory._http_hosts.media_refusal``): two ``Content-Type`` headers, or a ``POST`` that is not
``application/json`` (any case, parameters or none), is ``415`` with a JSON-RPC error object
(``-32600``, id null, as the SDK's own ``415``) naming ``UNSUPPORTED_MEDIA_TYPE``. The SDK's checks
answered ``400`` for ``text/plain`` or none, ``415`` for ``application/jsonx`` or
``Application/JSON`` (which ``coffer-api`` serves), served ``application/json, text/plain``,
and read the first of two; a wrong type sent with ``Expect: 100-continue`` was told to send its body
first. A type that passes is handed on lower-cased (the SDK's transport compares it case-sensitively).

A body holding a lone surrogate escape (``"\\ud800"``) is JSON the SDK's transport refuses as not
parsing (``400`` "Parse error: unexpected end of hex escape", id null); ``refused`` (``cli``'s
``answer_over_http``) answers such a request as stdio does, ``INVALID_INPUT`` under its id, once it
passed the transport's own checks (``Host``, ``Origin``, ``Content-Type``); so it does a body naming
one key twice in one object, which the transport served by its last value (a notification so named
is ``400`` with the error under a null id: there is no id to answer under, and the transport's rule
for a notification the server cannot accept is an HTTP error status). Every body is read
once more for it (a JSON parse, a few microseconds for a tool call's size).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from coffer_memory._http_hosts import media_refusal
from coffer_memory.vocabulary import MAX_REQUEST_BODY_BYTES

from .refusals import send_envelope, send_jsonrpc_error


class BoundedBody:
    """ASGI middleware refusing a request whose body is larger than ``limit`` bytes."""

    def __init__(
        self,
        app: Any,
        limit: int = MAX_REQUEST_BODY_BYTES,
        refused: Callable[[dict[str, Any], bytes], Awaitable[tuple[int, bytes] | None]] | None = None,
    ) -> None:
        self.app = app
        self.limit = limit
        self.refused = refused

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Refuse an oversized body, else pass the request on with its body read (if it has one)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        length = headers.get(b"content-length", b"").strip()
        if length.isdigit() and int(length) > self.limit:
            await self._refuse(send)
            return
        types = [value for key, value in scope.get("headers") or () if key == b"content-type"]
        refused = media_refusal(
            scope["method"],
            types[-1].decode("latin-1") if types else None,
            several=len(types) > 1,
            needs_json=scope["method"] == "POST",
        )
        if refused is not None:
            await send_jsonrpc_error(
                send, refused.status, f"{refused.code}: {refused.message}", refused.details
            )
            return
        if types:
            scope = {**scope, "headers": [_lowered(key, value) for key, value in scope["headers"]]}
        if not (length not in (b"", b"0") or b"transfer-encoding" in headers):
            await self.app(scope, receive, send)  # no body: a GET of the event stream, a DELETE
            return
        body: list[bytes] = []
        pending: list[dict[str, Any]] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)
                break
            body.append(message.get("body", b""))
            size += len(body[-1])
            if size > self.limit:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        whole = b"".join(body)
        answer = await self.refused(scope, whole) if self.refused and whole else None
        if answer is not None:
            status, data = answer
            fields = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": fields})
            await send({"type": "http.response.body", "body": data})
            return
        pending.insert(0, {"type": "http.request", "body": whole, "more_body": False})

        async def replay() -> Any:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any) -> None:
        message = f"a request body may hold at most {self.limit} bytes"
        details = {"limit": self.limit}  # as coffer-api's 413 says it (it said nothing)
        await send_envelope(send, 413, "REQUEST_TOO_LARGE", message, [(b"connection", b"close")], details)


def _lowered(key: bytes, value: bytes) -> tuple[bytes, bytes]:
    """A ``Content-Type`` with its media type lower-cased (``Application/JSON; charset=UTF-8`` ->
    ``application/json; charset=UTF-8``); any other header as it is."""
    if key != b"content-type":
        return key, value
    media, semicolon, parameters = value.partition(b";")
    return key, media.strip().lower() + semicolon + parameters

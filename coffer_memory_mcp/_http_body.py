"""``BoundedBody``: a request body to ``coffer-mcp --transport streamable-http`` is at most
``MAX_REQUEST_BODY_BYTES``.

The SDK's transport reads a POST's body whole (``await request.body()``) before it looks at it:
a body of gigabytes, or a chunked one that never ended, was taken into memory. A body declared
(``Content-Length``) or sent past the bound is ``413 REQUEST_TOO_LARGE`` with the error envelope
and ``Connection: close``; the rest is never read. A body within it is read here and handed on.
"""

from __future__ import annotations

from typing import Any

from coffer_memory.vocabulary import MAX_REQUEST_BODY_BYTES

from .refusals import send_envelope


class BoundedBody:
    """ASGI middleware refusing a request whose body is larger than ``limit`` bytes."""

    def __init__(self, app: Any, limit: int = MAX_REQUEST_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

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
        pending.insert(0, {"type": "http.request", "body": b"".join(body), "more_body": False})

        async def replay() -> Any:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any) -> None:
        message = f"a request body may hold at most {self.limit} bytes"
        await send_envelope(send, 413, "REQUEST_TOO_LARGE", message, [(b"connection", b"close")])

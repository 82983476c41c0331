"""``TypedRefusals``: the MCP SDK's plain-text HTTP refusals answered with coffer's error envelope.

Over streamable HTTP the SDK refuses a foreign ``Host`` (421) or ``Origin`` (403), a body that is
not JSON (400), one too large (413) and an unknown path (404) in plain text; every other answer is
JSON-RPC. This middleware gives those the ``{"error": {"code", "message", "details"}}`` that the
rest of coffer answers with, the SDK's text as the message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp_types import INVALID_REQUEST

from coffer_memory._http_hosts import HostCheck

__all__ = ["CODES", "HostGuard", "TypedRefusals", "send_envelope", "send_jsonrpc_error"]

CODES = {
    400: "INVALID_INPUT",
    403: "ORIGIN_NOT_ALLOWED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_TOO_LARGE",
    421: "HOST_NOT_ALLOWED",
}
"""The error code of each plain-text refusal, by HTTP status."""


async def send_envelope(
    send: Any,
    status: int,
    code: str,
    message: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
    details: dict[str, Any] | None = None,
) -> None:
    """Answer with the error envelope (``headers`` besides the content type and length)."""
    body = json.dumps({"error": {"code": code, "message": message, "details": details or {}}}).encode()
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


async def send_jsonrpc_error(
    send: Any, status: int, message: str, data: dict[str, Any] | None = None
) -> None:
    """Answer with a JSON-RPC error object (``-32600``, id null), as the SDK's transport answers a
    request it refuses (``data``, when given, as the error's ``data``)."""
    error: dict[str, Any] = {"code": INVALID_REQUEST, "message": message}
    if data:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})


class TypedRefusals:
    """ASGI middleware turning a plain-text answer with a status of ``CODES`` into the envelope."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Pass the request on; hold back a plain-text refusal and answer the envelope instead."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused: dict[str, Any] | None = None
        text = b""

        async def sending(message: dict[str, Any]) -> None:
            nonlocal refused, text
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", ())).get(b"content-type", b"")
                # The SDK's transport-security answers carry no content type at all.
                plain = content_type.split(b";")[0].strip() in (b"", b"text/plain")
                if message["status"] in CODES and plain:
                    refused = message
                    return
            elif refused is not None and message["type"] == "http.response.body":
                text += message.get("body", b"")
                if not message.get("more_body", False):
                    status = refused["status"]
                    message_text = text.decode("utf-8", "replace").strip() or "refused"
                    await send_envelope(send, status, CODES[status], message_text)
                return
            await send(message)

        await self.app(scope, receive, sending)


class HostGuard:
    """ASGI middleware judging ``Host`` and ``Origin`` by ``coffer-api``'s rule
    (``coffer_memory._http_hosts``): ``421 HOST_NOT_ALLOWED`` or ``403 ORIGIN_NOT_ALLOWED`` with the
    envelope. In the place of the SDK's own check, which read only the first of two ``Host`` (or
    ``Origin``) headers and refused ``LOCALHOST``, ``localhost.`` and a ``Host`` without a port."""

    def __init__(self, app: Any, check: HostCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Refuse a foreign or repeated ``Host`` or ``Origin``; pass everything else through."""
        if scope["type"] == "http":
            refused = self.check.refusal_of(scope.get("headers") or (), scope.get("server"))
            if refused is not None:
                await send_envelope(
                    send, refused.status, refused.code, refused.message, details=refused.details
                )
                return
        await self.app(scope, receive, send)

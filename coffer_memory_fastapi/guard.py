"""``RequestGuard``: what every HTTP request must pass before a route sees it.

A browser lets any web page send requests to ``127.0.0.1``. Three doors stay shut here:

- DNS rebinding: a page on ``attacker.example`` re-pointed at 127.0.0.1 sends ``Host:
  attacker.example``. Only loopback names, the address the connection arrived at and the
  configured hosts are served; another Host is ``421 HOST_NOT_ALLOWED``.
- Cross-site requests: an ``Origin`` that is not this server's own (an allowed host on the port
  of the request's ``Host``), an ``--allowed-origin`` or a configured CORS origin is ``403
  ORIGIN_NOT_ALLOWED`` (no Origin at all is fine: curl, the hook, scripts); a page another server
  on this machine serves (``http://localhost:3000``) is another origin.
- Blind "simple requests" (``text/plain``, forms, multipart, no Content-Type) need no CORS
  preflight, so a POST must say ``Content-Type: application/json`` (even with an empty body), and
  so must any other body; else ``415 UNSUPPORTED_MEDIA_TYPE``. So is any request with two
  ``Content-Type`` headers: this check read the last and FastAPI parses the body by the first.

- Blind cross-site loads: an ``<img>``, ``<script>`` or ``<link>`` on another site sends a GET
  with no Origin, which the rule above lets through (curl sends none either); ``GET
  /api/v1/agents?check_mcp=true`` starts processes. A browser marks every request it sends with
  ``Sec-Fetch-Site``: one another site made (``cross-site``, ``same-site``, or a value no browser
  sends, such as ``Cross-Site``) without an Origin is ``403 ORIGIN_NOT_ALLOWED`` unless it is the
  user following a link to a page outside ``/api/`` (``Sec-Fetch-Mode: navigate`` at the top
  level: not into an ``<iframe>``). Clients that are not browsers send no such header. A
  navigation a page of this origin started into ``/api/`` (a link in a fact the web view shows,
  clicked) is refused the same way. The rule, and how a value off the spec's list is read, is
  ``coffer_memory._http_hosts.fetch_refusal``.

A change (POST, PUT, PATCH, DELETE) to a path ending in ``/`` is ``404 NOT_FOUND``, not
redirected to the path without it (see ``_CHANGING_METHODS``).

A request carrying two ``Host`` (or two ``Origin``) headers is refused as a foreign one: this
check would read one and Starlette (links, redirects, CORS) the other. The ``Host`` and ``Origin``
rule, the fetch metadata's and the ``Content-Type``'s are ``coffer_memory._http_hosts``
(``coffer-mcp --transport streamable-http`` judges by them too).

Then the optional bearer token (scheme matched case-insensitively, value in constant time). A
browser cannot send that header, so the read-only web view (``ui_prefix``) also takes it once as
``?token=``: the answer is a redirect to the same page without it, setting an HttpOnly,
SameSite=Strict cookie (an HMAC of the token, never the token) that only GETs of the pages accept.
Then the body's size: one declared (``Content-Length``) or sent (a chunked body, counted as it is
read) past ``max_body`` bytes (``body_limits`` for some paths) is ``413 REQUEST_TOO_LARGE`` with
``Connection: close``, the rest never read: a body of gigabytes, or a chunked one that never
ended, was read into memory whole. Then a
JSON body holding a lone surrogate (``"\\ud800"``), which no file can store, or an object naming
one key twice (``{"text": "a", "text": "b"}``; JSON parsers keep the last or the first, so
whatever read it before the route, a proxy or a log, may have seen another request): ``422
INVALID_INPUT``.
Answers outside ``/api/`` (``/docs``, ``/redoc``, the web view) may not be framed by another page
(``X-Frame-Options: DENY``, ``frame-ancestors 'none'``): a page framing ``/docs`` could lead a
click onto "Try it out" of a DELETE.
A pure ASGI middleware: one pass over the headers, the body is buffered (bounded) only for that check.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coffer_memory import KeyNamedTwice, keys_once_each, safe_echo
from coffer_memory._http_hosts import (
    HostCheck,
    HostRule,
    fetch_refusal,
    fetch_value,
    is_json,
    media_refusal,
)
from coffer_memory.vocabulary import MAX_REQUEST_BODY_BYTES

from . import errors

_BODY_METHODS = frozenset({"PUT", "PATCH", "DELETE"})
# Starlette answers a path with a stray trailing '/' by a 307 to the path without it, and a 307
# keeps the method: ``DELETE .../facts/`` (an id that came out empty) would become ``DELETE
# .../facts``, which clears the store. Reads keep the redirect; changes are refused instead.
_CHANGING_METHODS = frozenset({"POST", *_BODY_METHODS})
UI_COOKIE = "coffer_ui"
"""The web view's cookie: HMAC-SHA256 of the token, so a leaked cookie is not the API's bearer token."""
# A JSON escape that may encode a surrogate, or one encoded as bytes (json.loads lets both
# through); only then is the body parsed a second time.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_UNFRAMEABLE = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
)
# An API answer holds memories: no browser or proxy cache may keep it on disk (the web view's
# pages say the same themselves); and it is text an agent wrote, which no browser may take for
# another type than the one it is sent as (an export opened in a tab, a JSON body as a script).
_API_HEADERS = ((b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"))


def lone_surrogate_at(value: Any, where: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """Where in parsed JSON a string (or key) holds a lone surrogate, or None."""
    if isinstance(value, str):
        return where if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = (*where, key) if _SURROGATE.search(key) else lone_surrogate_at(item, (*where, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = lone_surrogate_at(item, (*where, index))
            if found is not None:
                return found
    return None


class RequestGuard:
    """ASGI middleware applying the checks of this module's docstring to every HTTP request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        hosts: HostRule,
        cors_origins: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        token: str | None = None,
        ui_prefix: str | None = None,
        max_body: int = MAX_REQUEST_BODY_BYTES,
        body_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.body_limits = dict(body_limits or {})
        self.hosts = hosts
        self.cors_origins = frozenset(o.rstrip("/").lower() for o in cors_origins)
        origins = [*self.cors_origins, *allowed_origins]
        self.host_check = HostCheck(hosts, origins, "; allow it with --allowed-host")
        self.token = token.encode() if token else None
        self.ui_prefix = ui_prefix
        self.ui_pass = hmac.new(self.token, b"coffer-ui", hashlib.sha256).hexdigest() if self.token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal, checks_body = self._check(scope)
        if refusal is None and checks_body:
            refusal, receive = await self._check_body(scope, receive)
        api = _split_root(scope)[1].startswith("/api/")
        send = _adding(send, _API_HEADERS if api else _UNFRAMEABLE)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> tuple[Response | None, bool]:
        """The refusal for this request's headers (or None), and whether its body needs reading."""
        host = origin = authorization = content_type = cookie = None
        fetch_site = fetch_mode = fetch_dest = purpose = None
        has_body = preflight = repeated_host = repeated_origin = repeated_type = False
        declared = 0
        for key, raw in scope["headers"]:
            if key == b"host":
                repeated_host = repeated_host or host is not None
                host = raw.decode("latin-1")
            elif key == b"origin":
                repeated_origin = repeated_origin or origin is not None
                origin = raw.decode("latin-1")
            elif key == b"authorization":
                authorization = raw
            elif key == b"content-type":
                repeated_type = repeated_type or content_type is not None
                content_type = raw.decode("latin-1")
            elif key == b"content-length":
                has_body = raw.strip() not in (b"", b"0")
                declared = int(raw) if raw.strip().isdigit() else 0  # the server parsed it already
            elif key == b"transfer-encoding":
                has_body = True
            elif key == b"access-control-request-method":
                preflight = True
            elif key == b"cookie":
                cookie = raw.decode("latin-1")
            elif key == b"sec-fetch-site":
                fetch_site = fetch_value(fetch_site, raw)
            elif key == b"sec-fetch-mode":
                fetch_mode = fetch_value(fetch_mode, raw)
            elif key == b"sec-fetch-dest":
                fetch_dest = fetch_value(fetch_dest, raw)
            elif key == b"sec-purpose":
                purpose = raw
        refused = self.host_check.refusal(
            host, origin, scope.get("server"), several_hosts=repeated_host, several_origins=repeated_origin
        )
        if refused is not None:
            return _refuse(refused.code, refused.message, **refused.details), False
        if fetch_site is not None:  # a browser's request: made by which site, to follow a link?
            page = scope["method"] in ("GET", "HEAD") and not _split_root(scope)[1].startswith("/api/")
            refused = fetch_refusal(origin, fetch_site, fetch_mode, fetch_dest, page=page, purpose=purpose)
            if refused is not None:
                return _refuse(refused.code, refused.message), False
        method = scope["method"]
        preflight = preflight and method == "OPTIONS" and origin is not None and bool(self.cors_origins)
        if self.token is not None and not preflight and not self._token_ok(authorization):
            if self._is_page(scope):
                return self._ui_refusal(scope, cookie), False
            return errors.envelope(
                "UNAUTHORIZED",
                "a bearer token is required: Authorization: Bearer <token>",
                headers={"WWW-Authenticate": "Bearer"},
            ), False
        path = _split_root(scope)[1]
        if declared > self._body_limit(scope):
            return self._too_large(scope), False
        if method in _CHANGING_METHODS and path.endswith("/") and path != "/":
            return _refuse(
                "NOT_FOUND",
                f"no {method} route ends with a trailing '/': {safe_echo(path, 200)} (is an id in it empty?)",
            ), False
        needs_json = method == "POST" or (method in _BODY_METHODS and has_body)
        if repeated_type or (needs_json and not is_json(content_type)):  # the rule's refusals only
            refused = media_refusal(method, content_type, several=repeated_type, needs_json=needs_json)
            assert refused is not None
            return _refuse(refused.code, refused.message, **refused.details), False
        return None, needs_json and has_body

    def _is_page(self, scope: Scope) -> bool:
        """A GET or HEAD of the web view (or of ``/``, which redirects there)."""
        if self.ui_prefix is None or scope["method"] not in ("GET", "HEAD"):
            return False
        _, path = _split_root(scope)
        return path == "/" or path == self.ui_prefix or path.startswith(f"{self.ui_prefix}/")

    def _ui_refusal(self, scope: Scope, cookie: str | None) -> Response | None:
        """None for the web view's cookie; for a right ``?token=``, the redirect that sets it."""
        assert self.token is not None and self.ui_pass is not None
        jar: SimpleCookie = SimpleCookie()
        with contextlib.suppress(CookieError):  # a malformed Cookie header is no cookie
            jar.load(cookie or "")
        morsel = jar.get(UI_COOKIE)
        if morsel is not None and hmac.compare_digest(morsel.value.encode(), self.ui_pass.encode()):
            return None
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        if given and hmac.compare_digest(given[-1].encode(), self.token):
            # The token leaves the address bar (and the history) at once; the cookie carries on.
            root, path = _split_root(scope)
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            response = RedirectResponse(f"{root}{path}" + (f"?{rest}" if rest else ""), status_code=303)
            response.set_cookie(
                UI_COOKIE,
                self.ui_pass,
                path=f"{root}/",
                httponly=True,
                samesite="strict",
                secure=scope.get("scheme") == "https",
            )
            return response
        return errors.envelope(
            "UNAUTHORIZED",
            f"a token is required: open {self.ui_prefix}?token=<token> once, "
            "or send Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )

    def _token_ok(self, authorization: bytes | None) -> bool:
        assert self.token is not None
        scheme, _, credentials = (authorization or b"").partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.token)

    def _body_limit(self, scope: Scope) -> int:
        return self.body_limits.get(_split_root(scope)[1], self.max_body)

    def _too_large(self, scope: Scope) -> JSONResponse:
        """``413``, closing the connection: the rest of the body is never read."""
        limit = self._body_limit(scope)
        return errors.envelope(
            "REQUEST_TOO_LARGE",
            f"a request body to {safe_echo(_split_root(scope)[1], 200)} may hold at most {limit} bytes",
            {"limit": limit},
            headers={"Connection": "close"},
        )

    async def _check_body(self, scope: Scope, receive: Receive) -> tuple[JSONResponse | None, Receive]:
        """Read the whole body (up to the path's limit, else ``413``), refuse it if it holds a lone
        surrogate, else replay it to the app."""
        limit = self._body_limit(scope)
        chunks: list[bytes] = []
        trailing: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                trailing.append(message)
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                return self._too_large(scope), receive
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *trailing]

        async def replay() -> Message:
            return pending.pop(0) if pending else await receive()

        try:
            parsed = json.loads(body, object_pairs_hook=keys_once_each)
        except KeyNamedTwice as twice:
            said = twice.message  # the one wording, the core's (coffer-mcp says the same)
            named_twice = {"loc": ["body"], "msg": said, "type": "duplicate_key"}
            return errors.envelope("INVALID_INPUT", f"body: {said}", {"errors": [named_twice]}), replay
        except (ValueError, RecursionError):  # not JSON, or nested too deep: the route answers that
            parsed = None
        if parsed is not None and _SURROGATE_ESCAPE.search(body):
            where = lone_surrogate_at(parsed)
            if where is not None:
                loc: list[str | int] = ["body", *(_escaped(p) for p in where)]
                msg = "a lone surrogate is not a character"
                error = {"loc": loc, "msg": msg, "type": "lone_surrogate"}
                where_text = ".".join(map(str, loc))
                return errors.envelope("INVALID_INPUT", f"{where_text}: {msg}", {"errors": [error]}), replay
        return None, replay


class RefusingCors(CORSMiddleware):
    """Starlette's CORS middleware, with a refused preflight answered by the error envelope
    (``403 ORIGIN_NOT_ALLOWED`` naming what was refused) instead of a plain-text 400."""

    def preflight_response(self, request_headers: Headers) -> Response:
        """The preflight's answer: Starlette's when it grants the request, else the envelope."""
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = bytes(response.body).decode().removeprefix("Disallowed CORS ").split(", ")
        asked = {
            "method": request_headers.get("access-control-request-method"),
            "headers": request_headers.get("access-control-request-headers"),
        }
        return errors.envelope(
            "ORIGIN_NOT_ALLOWED",
            f"a cross-origin request from {safe_echo(request_headers['origin'])!r} may not use this "
            + ", ".join(refused),
            {
                "origin": safe_echo(request_headers["origin"]),
                "refused": refused,
                **{k: safe_echo(v, 200) for k, v in asked.items() if v},
            },
            headers={k: v for k, v in response.headers.items() if k.startswith("access-control-")},
        )


def _adding(send: Send, added: tuple[tuple[bytes, bytes], ...]) -> Send:
    """``send`` adding ``added`` to the answer's headers (each unless the answer set it)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {key.lower() for key, _ in headers}
            headers += [(key, value) for key, value in added if key not in present]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def _split_root(scope: Scope) -> tuple[str, str]:
    """A mounted app's root path, and the request path relative to it."""
    root: str = scope.get("root_path", "")
    path: str = scope["path"]
    return root, path[len(root) :] if root and path.startswith(root) else path


def _escaped(part: str | int) -> str | int:
    # A key may hold the surrogate itself; the answer must still encode.
    return part.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(part, str) else part


def _refuse(code: str, message: str, **details: str | None) -> JSONResponse:
    return errors.envelope(code, message, {k: v for k, v in details.items() if v is not None})

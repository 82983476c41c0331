"""Which ``Host`` and ``Origin`` a request to coffer's HTTP faces may carry: one rule for
``coffer-api`` (``coffer_memory_fastapi.guard.RequestGuard``) and ``coffer-mcp --transport
streamable-http`` bound to loopback (``coffer_memory_mcp.refusals.HostGuard``).

- **One** ``Host`` and at most one ``Origin``: a request with two ``Host`` headers is invalid (RFC
  9112 3.2), and a check reading one while the app reads the other is no check (the MCP SDK read
  the first, Starlette's links and redirects the first, the REST guard the last).
- A ``Host`` is a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``), the address the
  connection arrived at, or an allowed host; compared as a host name is (RFC 9110 4.2.3): case
  does not matter, ``localhost.`` is ``localhost``, and a missing port is the scheme's default,
  which is any port here (the MCP SDK refused ``LOCALHOST``, ``localhost.`` and a ``Host`` without
  a port, and took ``localhost:1@evil.example`` for ``localhost``).
- An ``Origin``, when present, is an ``http(s)`` origin whose host passes the ``Host`` rule (a
  ``*`` entry does not count), the same origin as the ``Host``, or a configured CORS origin;
  ``null`` and an empty one are refused.

- A request another site's page made (``Sec-Fetch-Site: cross-site`` or ``same-site``, in any case)
  without an ``Origin`` is refused as a foreign ``Origin`` is (``<img>``, ``<script>``, a form's
  navigation send none): ``other_site_refusal``; ``coffer-api`` lets the user follow a link to one
  of its pages, coffer-mcp serves no page.
- **One** ``Content-Type``, as one ``Host``: two are refused whatever they say (the REST guard read
  the last, FastAPI, Starlette and the MCP SDK the first). A ``POST`` (``coffer-api``: any request
  with a body) must say ``application/json``, in any case, with parameters or none: anything else
  (none, ``text/plain``, ``application/jsonx``, a list ``application/json, text/plain``) is ``415
  UNSUPPORTED_MEDIA_TYPE`` in both faces (``media_refusal``).

Plain Python: the faces turn a ``Refusal`` into their own answer (``coffer-api`` the error envelope,
coffer-mcp the envelope, or a JSON-RPC error object for a ``415``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import safe_echo

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""Host names served by default, with any port (besides the address a connection arrived at)."""

_NAME = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]*:[0-9a-f:.]*")  # a DNS name or IPv4, or an IPv6 literal


def split_authority(value: str) -> tuple[str, str | None] | None:
    """``'[::1]:8765'`` -> ``('::1', '8765')``, ``'Box.LAN.'`` -> ``('box.lan', None)``; None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") > 1:  # a bare IPv6 address is not a valid Host
        return None
    else:
        host, colon, port_text = value.partition(":")
        port = port_text if colon else None
    if not _NAME.fullmatch(host) or (port is not None and not port.isdigit()):
        return None
    return host.rstrip("."), port


class HostRule:
    """Which ``Host`` values are served: loopback names, the connection's own address, extras.

    An extra is ``name`` (any port), ``name:port`` (that port only) or ``*`` (any Host: only
    behind a proxy that checks Host itself).
    """

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self.any_host = False
        self.names: set[str] = set(LOOPBACK_HOSTS)
        self.pairs: set[tuple[str, str]] = set()
        for entry in extra:
            if entry.strip() == "*":
                self.any_host = True
                continue
            bare_ipv6 = entry.count(":") > 1 and "[" not in entry
            parsed = split_authority(f"[{entry.strip()}]" if bare_ipv6 else entry)
            if parsed is None:
                raise ValueError(f"not a host name or host:port: {entry!r}")
            host, port = parsed
            if port is None:
                self.names.add(host)
            else:
                self.pairs.add((host, port))

    def allows(self, authority: str, server: tuple[str, Any] | None, *, wildcard: bool = True) -> bool:
        """Whether ``authority`` (a Host header, or an Origin's host[:port]) may reach this app;
        ``wildcard=False`` ignores a ``*`` entry (it opens Host, not Origin)."""
        if self.any_host and wildcard:
            return True
        parsed = split_authority(authority)
        if parsed is None:
            return False
        host, port = parsed
        if host in self.names or (port is not None and (host, port) in self.pairs):
            return True
        # The address the client connected to (an IP literal with a real server) cannot be a
        # rebound name: serving it is serving the bound address.
        return server is not None and isinstance(server[0], str) and host == server[0].lower()


def origin_authority(origin: str) -> str | None:
    """The ``host[:port]`` of an ``http(s)`` origin, or None (another scheme, a path, a userinfo)."""
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest or "@" in rest:
        return None
    return rest


_STATUS = {"HOST_NOT_ALLOWED": 421, "ORIGIN_NOT_ALLOWED": 403, "UNSUPPORTED_MEDIA_TYPE": 415}
# Sec-Fetch-Site values of a request made by another site's page ("none": typed by the user).
_OTHER_SITE = frozenset({b"cross-site", b"same-site"})


@dataclass(frozen=True)
class Refusal:
    """Why a request's headers are refused: ``code`` and ``status`` (``421 HOST_NOT_ALLOWED``,
    ``403 ORIGIN_NOT_ALLOWED`` or ``415 UNSUPPORTED_MEDIA_TYPE``), the message, the envelope's details."""

    code: str
    message: str
    details: dict[str, str] = field(default_factory=dict)

    @property
    def status(self) -> int:
        """The HTTP status of ``code``."""
        return _STATUS[self.code]


def other_site_refusal(
    origin: str | None, fetch_site: bytes | None, followed_link: Callable[[], bool] = lambda: False
) -> Refusal | None:
    """The refusal of a request another site's page made without an ``Origin`` (``Sec-Fetch-Site``
    is ``fetch_site``), unless ``followed_link()`` (a page the user may open from a link)."""
    if origin is not None or fetch_site is None or fetch_site.lower() not in _OTHER_SITE or followed_link():
        return None
    echoed = safe_echo(fetch_site.decode("latin-1"))
    return Refusal(
        "ORIGIN_NOT_ALLOWED", f"a request another site's page made (Sec-Fetch-Site: {echoed}) is not served"
    )


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value is ``application/json`` (any case, any parameters)."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == "application/json"


def media_refusal(
    method: str, content_type: str | None, *, several: bool, needs_json: bool
) -> Refusal | None:
    """The refusal of a request whose (last) ``Content-Type`` is ``content_type`` (None: none),
    ``several`` when it carried more than one, ``needs_json`` when its body must be JSON."""
    if several:
        return Refusal("UNSUPPORTED_MEDIA_TYPE", "a request may carry one Content-Type header, not several")
    if not needs_json or is_json(content_type):
        return None
    echoed = None if content_type is None else safe_echo(content_type)
    return Refusal(
        "UNSUPPORTED_MEDIA_TYPE",
        f"{method} needs Content-Type: application/json (got {echoed or 'none'})",
        {} if echoed is None else {"content_type": echoed},
    )


class HostCheck:
    """The rule of this module's docstring for one server: its ``HostRule``, its CORS origins,
    and ``hint``, what a refused ``Host`` is told to do (``coffer-api``: its ``--allowed-host``)."""

    def __init__(self, hosts: HostRule, cors_origins: Iterable[str] = (), hint: str = "") -> None:
        self.hosts = hosts
        self.cors_origins = frozenset(o.rstrip("/").lower() for o in cors_origins)
        self.hint = hint

    def refusal(
        self,
        host: str | None,
        origin: str | None,
        server: tuple[str, Any] | None,
        *,
        several_hosts: bool = False,
        several_origins: bool = False,
    ) -> Refusal | None:
        """The refusal of a request whose (last) ``Host`` and ``Origin`` headers are ``host`` and
        ``origin`` (None: none), arriving at ``server``; None when both pass."""
        if several_hosts:
            return Refusal("HOST_NOT_ALLOWED", "a request may carry one Host header, not several")
        if several_origins:
            return Refusal("ORIGIN_NOT_ALLOWED", "a request may carry one Origin header, not several")
        if host is None:  # an HTTP/1.0 request (HTTP/1.1 asks for a Host); the message said "Host None"
            return Refusal("HOST_NOT_ALLOWED", "a request must carry a Host header")
        if not self.hosts.allows(host, server):
            echoed = safe_echo(host)
            return Refusal(
                "HOST_NOT_ALLOWED", f"Host {echoed!r} is not served here{self.hint}", {"host": echoed}
            )
        if origin is not None and not self.origin_allowed(origin, host, server):
            echoed = safe_echo(origin)
            return Refusal("ORIGIN_NOT_ALLOWED", f"Origin {echoed!r} is not allowed", {"origin": echoed})
        return None

    def origin_allowed(self, origin: str, host: str, server: tuple[str, Any] | None) -> bool:
        """Whether ``origin`` may call a request whose (allowed) ``Host`` is ``host``."""
        if origin.rstrip("/").lower() in self.cors_origins:
            return True
        authority = origin_authority(origin)
        if authority is None:
            return False
        # Same origin as the (already allowed) Host: e.g. /docs served behind a proxy.
        return authority.lower() == host.strip().lower() or self.hosts.allows(
            authority, server, wildcard=False
        )

    def refusal_of(
        self, headers: Sequence[tuple[bytes, bytes]], server: tuple[str, Any] | None
    ) -> Refusal | None:
        """``refusal`` for an ASGI request's ``headers`` (lower-case names), then
        ``other_site_refusal`` (no page is served: no link may be followed)."""
        hosts = [value.decode("latin-1") for key, value in headers if key == b"host"]
        origins = [value.decode("latin-1") for key, value in headers if key == b"origin"]
        origin = origins[-1] if origins else None
        refused = self.refusal(
            hosts[-1] if hosts else None,
            origin,
            server,
            several_hosts=len(hosts) > 1,
            several_origins=len(origins) > 1,
        )
        if refused is not None:
            return refused
        fetch_site = next((value for key, value in reversed(headers) if key == b"sec-fetch-site"), None)
        return other_site_refusal(origin, fetch_site)

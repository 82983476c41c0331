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
- An ``Origin``, when present, is the server's own: an ``http(s)`` origin whose host passes the
  ``Host`` rule (a ``*`` entry does not count) on the port of the ``Host`` (a missing one is the
  origin's scheme's default), or the ``Host`` itself; else one the user lists (``--allowed-origin``,
  and ``coffer-api``'s CORS origins). The scheme is not compared: one port serves one scheme, and
  behind a proxy the origin's may be ``https``. Another port of this machine is another server
  (a dev server's page at ``http://localhost:3000``): any loopback origin on any port passed, so
  every local web app's pages could drive both faces. ``null`` and an empty one are refused.

- A request another site's page made without an ``Origin`` is refused as a foreign ``Origin`` is
  (``<img>``, ``<script>``, a form's navigation send none): ``fetch_refusal``. Fetch metadata
  values are structured-field tokens (RFC 8941: case-sensitive) from a short list, and browsers
  send them exactly so (``cross-site``, never ``Cross-Site``); the spec has servers ignore an
  invalid one, but ignoring it reads the request as made by no browser, the one reading that is
  trusted, so a value that is not on the list (another case, an unknown word, two headers) is
  read the way that refuses: ``Sec-Fetch-Site`` as another site's, ``Sec-Fetch-Mode`` as a
  navigation into the API, and never as the user following a link (Go's
  ``http.CrossOriginProtection`` also trusts only the exact ``same-origin`` and ``none``).
  ``coffer-api`` lets the user follow a link to one of its pages; coffer-mcp serves no page.
- **One** ``Content-Type``, as one ``Host``: two are refused whatever they say (the REST guard read
  the last, FastAPI, Starlette and the MCP SDK the first). A ``POST`` (``coffer-api``: any request
  with a body) must say ``application/json``, in any case, with parameters or none: anything else
  (none, ``text/plain``, ``application/jsonx``, a list ``application/json, text/plain``) is ``415
  UNSUPPORTED_MEDIA_TYPE`` in both faces (``media_refusal``).

- ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed from the addresses the user names
  (``--forwarded-allow-ips``: a proxy in front), from no one by default: ``forwarded_config``.

Plain Python: the faces turn a ``Refusal`` into their own answer (``coffer-api`` the error envelope,
coffer-mcp the envelope, or a JSON-RPC error object for a ``415``).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Iterable, Sequence
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


_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_DEFAULT_PORTS = {"http": "80", "https": "443"}


def normal_origin(origin: str) -> str:
    """``origin`` as listed entries are compared, and as a browser sends one (RFC 6454): lower
    case, no trailing ``/``, no default port."""
    origin = origin.strip().rstrip("/").lower()
    scheme, _, rest = origin.partition("://")
    default = _DEFAULT_PORTS.get(scheme)
    return origin.removesuffix(f":{default}") if default and not rest.endswith("]") else origin


def origin_entry(value: str) -> str:
    """An ``--allowed-origin`` entry (``scheme://host[:port]``), as it is compared; ``ValueError``
    naming it when it is no origin (no scheme, a path, a userinfo, ``null``)."""
    scheme, sep, rest = value.strip().rstrip("/").lower().partition("://")
    if (
        not sep
        or not _SCHEME.fullmatch(scheme)
        or "/" in rest
        or "@" in rest
        or split_authority(rest) is None
    ):
        raise ValueError(f"{value!r} is not an origin (scheme://host[:port], e.g. http://localhost:3000)")
    return normal_origin(value)


def origins_option(
    parser: argparse.ArgumentParser, given: Sequence[str], env: str, flag: str = "--allowed-origin"
) -> list[str]:
    """``flag``'s entries (``given``: ``--allowed-origin``, ``--cors-origin``) and the
    comma-separated ones of the environment variable ``env``, as compared; a malformed one (a
    ``*`` too: no wildcard is served) is ``parser``'s one-line error."""
    listed = [*given, *(part for part in os.environ.get(env, "").split(",") if part.strip())]
    try:
        return [origin_entry(entry) for entry in listed]
    except ValueError as exc:
        parser.error(f"{flag} / ${env}: {exc}")


def origin_authority(origin: str) -> str | None:
    """The ``host[:port]`` of an ``http(s)`` origin, or None (another scheme, a path, a userinfo)."""
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest or "@" in rest:
        return None
    return rest


_STATUS = {"HOST_NOT_ALLOWED": 421, "ORIGIN_NOT_ALLOWED": 403, "UNSUPPORTED_MEDIA_TYPE": 415}
# Sec-Fetch-Site of a request this server's own page made, or the user ("none": a typed address).
_OWN_SITE = frozenset({b"same-origin", b"none"})
# Sec-Fetch-Mode of a script's or a subresource's fetch; any other value is read as a navigation.
_NOT_NAVIGATION = frozenset({b"cors", b"no-cors", b"same-origin", b"websocket"})
_OWS = b" \t"


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


def fetch_value(earlier: bytes | None, raw: bytes) -> bytes:
    """A fetch metadata header's value after one more field line ``raw``: several lines of one
    header are one comma-separated list (RFC 9110 5.3), which is no valid token."""
    return raw if earlier is None else earlier + b", " + raw


def fetch_refusal(
    origin: str | None,
    site: bytes | None,
    mode: bytes | None,
    dest: bytes | None,
    *,
    page: bool,
    purpose: bytes | None = None,
) -> Refusal | None:
    """The refusal of a request by its fetch metadata (``Sec-Fetch-Site``, ``-Mode``, ``-Dest``
    values, None when absent; ``fetch_value`` for a repeated one), or None; ``page``: a ``GET`` or
    ``HEAD`` of a page a link may lead to (never in coffer-mcp), which the user may follow a link to;
    ``purpose``: ``Sec-Purpose`` (a prefetch or prerender the browser made on its own).

    A browser's request (``site`` given) is refused when another site's page made it without an
    ``Origin``, and when a page of this origin navigates into what is not a page (a link in a fact
    that the web view shows, clicked). See the module docstring for values not on the spec's list.
    """
    if site is None:  # no browser: curl, scripts, agents, the hook
        return None
    site = site.strip(_OWS)  # optional whitespace is no part of a field value (RFC 9110 5.5)
    mode = None if mode is None else mode.strip(_OWS)
    if site in _OWN_SITE:
        if site == b"same-origin" and not page and mode is not None and mode not in _NOT_NAVIGATION:
            return Refusal(
                "ORIGIN_NOT_ALLOWED",
                "a link followed from a page into the API is not served; type the address, or use a client",
            )
        return None
    if origin is not None:  # the Origin rule judged it already
        return None
    if page and mode == b"navigate" and (dest is None or dest.strip(_OWS) == b"document") and purpose is None:
        # The user following a link. Not into an <iframe> (``Sec-Fetch-Dest: iframe``): another
        # site's hidden frames of /ui/search ran recalls it could time. Nor a prefetch the other
        # site's speculation rules asked for (``Sec-Purpose: prefetch``, with the headers of a
        # navigation): no user followed anything. Browsers too old to send Sec-Fetch-Dest send
        # only the other two.
        return None
    echoed = safe_echo(site.decode("latin-1"))
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
    """The rule of this module's docstring for one server: its ``HostRule``, the origins the user
    lists (``--allowed-origin``, ``coffer-api``'s CORS origins), and ``hint``, what a refused
    ``Host`` is told to do (``coffer-api``: its ``--allowed-host``)."""

    def __init__(self, hosts: HostRule, origins: Iterable[str] = (), hint: str = "") -> None:
        self.hosts = hosts
        self.origins = frozenset(normal_origin(o) for o in origins)
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
        if self.origins and normal_origin(origin) in self.origins:
            return True
        authority = origin_authority(origin)
        if authority is None:
            return False
        if authority.strip().lower() == host.strip().lower():  # e.g. /docs served behind a proxy
            return True
        parsed, reached = split_authority(authority), split_authority(host)
        if parsed is None or reached is None:
            return False
        # The port a browser reached this server by is the Host's: a page on another port is
        # another server's, whatever loopback name it is served by.
        default = _DEFAULT_PORTS.get(origin.partition("://")[0].strip().lower(), "80")
        if (parsed[1] or default) != (reached[1] or default):
            return False
        return self.hosts.allows(authority, server, wildcard=False)

    def refusal_of(
        self, headers: Sequence[tuple[bytes, bytes]], server: tuple[str, Any] | None
    ) -> Refusal | None:
        """``refusal`` for an ASGI request's ``headers`` (lower-case names), then
        ``fetch_refusal`` (no page is served: no link may be followed)."""
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
        fetch: dict[bytes, bytes] = {}
        for key, value in headers:
            if key.startswith(b"sec-fetch-"):
                fetch[key] = fetch_value(fetch.get(key), value)
        site, mode, dest = (fetch.get(b"sec-fetch-" + part) for part in (b"site", b"mode", b"dest"))
        return fetch_refusal(origin, site, mode, dest, page=False)


def forwarded_config(parser: argparse.ArgumentParser, given: Sequence[str], env: str) -> dict[str, Any]:
    """uvicorn's ``Config`` settings for ``--forwarded-allow-ips`` (``given``, each entry one or
    more comma-separated addresses or networks, or ``*``), else the environment variable ``env``;
    a malformed entry is ``parser``'s one-line error.

    uvicorn believes ``X-Forwarded-For`` and ``X-Forwarded-Proto`` from 127.0.0.1 by default
    (``proxy_headers=True``): any local page or process sending them was logged as another
    address, and its ``https`` made the web view's links, the redirects and the view's cookie those
    of an https server that is not there. They are believed only from the proxies the user names;
    uvicorn's own ``$FORWARDED_ALLOW_IPS``, set for some other server, opens nothing here.
    """
    entries = [part.strip() for value in given for part in value.split(",") if part.strip()]
    if not given:
        entries = [part.strip() for part in os.environ.get(env, "").split(",") if part.strip()]
    if not entries:
        return {"proxy_headers": False}
    for entry in entries:
        if entry == "*":
            continue
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            where = "--forwarded-allow-ips" if given else f"${env}"
            parser.error(f"{where}: {entry!r} is not an IP address, a network (a.b.c.d/n) or *")
    return {"proxy_headers": True, "forwarded_allow_ips": entries}

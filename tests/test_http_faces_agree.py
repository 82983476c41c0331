"""``coffer-api`` and ``coffer-mcp --transport streamable-http`` refuse the same requests alike.

One table of ``Host`` and ``Origin`` headers, and a target past what the HTTP parser reads, sent byte
for byte to a real server of each face on 127.0.0.1 (a client library would normalise them: one
``Host``, lower case, a port). The faces judged these differently: the MCP face took a second
``Host`` or ``Origin`` when the first was good and refused ``LOCALHOST``, ``localhost.`` and a
``Host`` without a port, which ``coffer-api`` serves; both answered a target over 64 KiB as "not
valid HTTP". They judged ``Content-Type`` differently (two of them: the REST guard read the last,
FastAPI and the MCP SDK the first; a wrong one: REST ``415``, MCP ``400`` or a JSON-RPC ``415``, and
MCP served ``application/json, text/plain``), and a request another site's page made without an
``Origin`` (``Sec-Fetch-Site: cross-site``: REST ``403``, MCP served it).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served import Served
from test_mcp_handshake import initialize

from coffer_memory._http_bounds import MAX_TARGET_BYTES
from coffer_memory.vocabulary import MAX_REQUEST_BODY_BYTES

INIT = json.dumps(initialize(1)).encode()  # the request the MCP face serves (200)


class Face:
    """A real server of one face, and the request that face serves (200) when nothing is refused."""

    def __init__(self, name: str, server: Served) -> None:
        self.name, self.server, self.port = name, server, server.port

    def request(self, headers: list[tuple[str, str]], target: str | None = None) -> bytes:
        head = [f"{k}: {v}" for k, v in headers]
        if self.name == "rest":
            lines = [f"GET {target or '/api/v1/memory_stores'} HTTP/1.1", *head]
            return "\r\n".join([*lines, "Connection: close", "", ""]).encode("latin-1")
        lines = [
            f"POST {target or '/mcp'} HTTP/1.1",
            *head,
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(INIT)}",
            "Connection: close",
        ]
        return "\r\n".join([*lines, "", ""]).encode("latin-1") + INIT

    def post(self, headers: list[tuple[str, str]]) -> bytes:
        """The POST this face serves when its headers pass (REST: a fact written, 201; MCP: an
        initialize, 200), with ``headers`` besides ``Host`` and instead of ``Content-Type``."""
        if self.name == "rest":
            body = json.dumps({"text": f"Faces agree, case {uuid.uuid4().hex}."}).encode()
            lines = ["POST /api/v1/memory_stores/global/facts HTTP/1.1"]
        else:
            body, lines = INIT, ["POST /mcp HTTP/1.1", "Accept: application/json, text/event-stream"]
        lines += [f"Host: 127.0.0.1:{self.port}", *(f"{k}: {v}" for k, v in headers)]
        lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        return "\r\n".join(lines).encode("latin-1") + body

    def send(self, request: bytes) -> tuple[int, dict[str, object]]:
        """``request`` as it is: the answer's status and its JSON body (``{}`` when it is none)."""
        return exchange(("127.0.0.1", self.port), request)


def exchange(address: tuple[str, int], request: bytes) -> tuple[int, dict[str, object]]:
    """``request`` sent as it is to ``address``: the answer's status and its JSON body (``{}``
    when it is none)."""
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    try:
        parsed = json.loads(body)
    except ValueError:  # the MCP face's answer to an initialize may be an event stream
        parsed = {}
    return int(head.split()[1]), parsed if isinstance(parsed, dict) else {}


@pytest.fixture(scope="module", params=["rest", "mcp"])
def face(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Face]:
    home = tmp_path_factory.mktemp(f"faces-{request.param}") / "home"
    env = {**os.environ, "COFFER_HOME": str(home)}
    if request.param == "rest":
        args = [str(Path(sys.executable).parent / "coffer-api"), "--log-level", "warning"]
    else:
        args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    with Served(args, env) as server:
        yield Face(request.param, server)


SERVED = 200
# (the Host headers, in order; what the request gets). "{port}" is the server's port.
HOSTS = [
    (["127.0.0.1:{port}"], SERVED),
    (["127.0.0.1"], SERVED),  # no port: the MCP face refused it
    (["localhost:{port}"], SERVED),
    (["LOCALHOST:{port}"], SERVED),  # a host name is case-insensitive (RFC 9110 4.2.3)
    (["localhost."], SERVED),  # the same name, fully qualified
    (["Localhost.:{port}"], SERVED),
    (["[::1]:{port}"], SERVED),
    (["[::1]"], SERVED),
    (["evil.example"], 421),
    (["evil.example:{port}"], 421),
    (["127.0.0.1.evil.example:{port}"], 421),
    (["localhost.evil.example"], 421),
    (["localhost:{port}@evil.example"], 421),
    (["localhost:x"], 421),
    (["::1"], 421),  # an IPv6 literal without brackets is no Host
    ([""], 421),
    ([], 421),  # HTTP/1.1 asks for a Host
    # More than one Host makes the request invalid (RFC 9112 3.2): the MCP face read the first.
    (["127.0.0.1:{port}", "evil.example"], 421),
    (["evil.example", "127.0.0.1:{port}"], 421),
    (["127.0.0.1:{port}", "127.0.0.1:{port}"], 421),
]
ORIGINS = [
    ([], SERVED),  # curl, scripts, agents: no Origin
    (["http://127.0.0.1:{port}"], SERVED),
    (["http://LOCALHOST:{port}"], SERVED),  # the server's own origin, by any loopback name
    (["http://localhost.:{port}"], SERVED),
    (["http://[::1]:{port}"], SERVED),
    (["https://localhost:{port}"], SERVED),  # one port serves one scheme: it is this server still
    # Another port of this machine is another server (a dev server's page at localhost:3000): both
    # faces served any loopback origin on any port, so its pages could drive them.
    (["http://localhost"], 403),
    (["https://localhost:9"], 403),
    (["http://localhost:3000"], 403),
    (["http://127.0.0.1:1"], 403),
    (["http://[::1]:8080"], 403),
    (["http://evil.example"], 403),
    (["http://localhost.evil.example"], 403),
    (["http://localhost:{port}@evil.example"], 403),
    (["http://localhost:{port}/path"], 403),  # an origin has no path
    (["file://localhost"], 403),
    (["null"], 403),  # a sandboxed frame, a file:// page
    ([""], 403),
    (["http://127.0.0.1:{port}", "http://evil.example"], 403),
    (["http://evil.example", "http://127.0.0.1:{port}"], 403),
    (["http://127.0.0.1:{port}", "http://127.0.0.1:{port}"], 403),
]
CODES = {421: "HOST_NOT_ALLOWED", 403: "ORIGIN_NOT_ALLOWED"}


def _ids(table: list[tuple[list[str], int]]) -> list[str]:
    return [" ".join(v or "(empty)" for v in values) or "(none)" for values, _ in table]


@pytest.mark.parametrize(("hosts", "expected"), HOSTS, ids=_ids(HOSTS))
def test_both_faces_judge_host_alike(face: Face, hosts: list[str], expected: int) -> None:
    headers = [("Host", h.format(port=face.port)) for h in hosts]
    status, body = face.send(face.request(headers))
    assert status == expected, (face.name, hosts, status, body)
    if expected != SERVED:
        assert body["error"]["code"] == CODES[expected], body  # type: ignore[index]
        assert "None" not in body["error"]["message"], body  # type: ignore[index]  (it said "Host None")


@pytest.mark.parametrize(("origins", "expected"), ORIGINS, ids=_ids(ORIGINS))
def test_both_faces_judge_origin_alike(face: Face, origins: list[str], expected: int) -> None:
    headers = [("Host", f"127.0.0.1:{face.port}"), *(("Origin", o.format(port=face.port)) for o in origins)]
    status, body = face.send(face.request(headers))
    assert status == expected, (face.name, origins, status, body)
    if expected != SERVED:
        assert body["error"]["code"] == CODES[expected], body  # type: ignore[index]


def test_a_target_past_what_the_parser_reads_is_uri_too_long(face: Face) -> None:
    # httptools parses no target past 65,535 bytes; such a request was answered "400 the request
    # is not valid HTTP", though it is. Now 414 names what is wrong, and the server serves on.
    path = "/api/v1/memory_stores" if face.name == "rest" else "/mcp"
    host = [("Host", f"127.0.0.1:{face.port}")]
    longest = f"{path}?q=" + "a" * (MAX_TARGET_BYTES - len(path) - 3)
    assert len(longest) == MAX_TARGET_BYTES
    assert face.send(face.request(host, longest))[0] not in (400, 414)  # parsed: the app answers
    for target in (longest + "a", longest + "a" * 200_000):
        status, body = face.send(face.request(host, target))
        assert status == 414, (face.name, len(target), status, body)
        error = body["error"]
        assert isinstance(error, dict) and error["code"] == "REQUEST_TOO_LARGE", body
        assert error["details"] == {"limit": MAX_TARGET_BYTES}
        assert "target" in error["message"] and "valid HTTP" not in error["message"], error
    assert face.send(face.request(host))[0] == SERVED


# (the Content-Type headers of a POST, in order; whether it is served). A wrong or repeated one is
# 415 in both faces: coffer-api's envelope (UNSUPPORTED_MEDIA_TYPE), coffer-mcp's JSON-RPC error.
TYPES = [
    (["application/json"], True),
    (["application/json; charset=utf-8"], True),
    (["application/json ; charset=utf-8"], True),
    (["Application/JSON"], True),  # a media type is case-insensitive: the MCP face answered 415
    (["APPLICATION/JSON; charset=UTF-8"], True),
    ([], False),  # the MCP face: 400
    ([""], False),
    (["text/plain"], False),  # a "simple request" a page may send without a preflight: MCP 400
    (["application/x-www-form-urlencoded"], False),
    (["multipart/form-data; boundary=x"], False),
    (["application/jsonx"], False),
    (["application/json-seq"], False),
    (["application/json, text/plain"], False),  # one type, not a list: the MCP face served it
    (["text/plain, application/json"], False),
    (["text/plain; a=application/json"], False),
    # Two Content-Type headers are refused as two Host are: the REST guard read the last and
    # FastAPI the first (422 "not a valid dictionary"), the MCP SDK the first (400, or served).
    (["application/json", "application/json"], False),
    (["text/plain", "application/json"], False),
    (["application/json", "text/plain"], False),
]


@pytest.mark.parametrize(("types", "served"), TYPES, ids=_ids([(t, 0) for t, _ in TYPES]))
def test_both_faces_judge_content_type_alike(face: Face, types: list[str], served: bool) -> None:
    status, body = face.send(face.post([("Content-Type", t) for t in types]))
    if served:
        assert status == (201 if face.name == "rest" else SERVED), (face.name, types, status, body)
        return
    assert status == 415, (face.name, types, status, body)
    error = body["error"]
    assert isinstance(error, dict), body
    if face.name == "rest":
        assert error["code"] == "UNSUPPORTED_MEDIA_TYPE", body
    else:  # the JSON-RPC error object, as the SDK answers its own 415
        assert body["jsonrpc"] == "2.0" and body["id"] is None and error["code"] == -32600, body
        assert error["message"].startswith("UNSUPPORTED_MEDIA_TYPE: "), body


# (the fetch metadata a browser sends, and an Origin; what the request gets). Another site's
# page's request without an Origin (an <img>, a <script>, a form) is 403 in both: MCP served it.
FETCHES = [
    ([], SERVED),
    ([("Sec-Fetch-Site", "none")], SERVED),  # typed by the user
    ([("Sec-Fetch-Site", "same-origin")], SERVED),
    ([("Sec-Fetch-Site", "cross-site")], 403),
    ([("Sec-Fetch-Site", "same-site")], 403),
    ([("Sec-Fetch-Site", "Cross-Site")], 403),  # no browser sends it; both faces served it
    ([("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors"), ("Sec-Fetch-Dest", "image")], 403),
    ([("Sec-Fetch-Site", "cross-site"), ("Origin", "http://localhost:{port}")], SERVED),  # the Origin rules
    ([("Sec-Fetch-Site", "cross-site"), ("Origin", "http://evil.example")], 403),
    # Values are case-sensitive tokens from a short list, which browsers send exactly: any other
    # is read as another site's, never as the trusted "made by no browser" (both faces served
    # these: they lowered the case, or read the last of two headers).
    ([("Sec-Fetch-Site", "SAME-ORIGIN")], 403),
    ([("Sec-Fetch-Site", "None")], 403),
    ([("Sec-Fetch-Site", "evil")], 403),
    ([("Sec-Fetch-Site", "")], 403),
    ([("Sec-Fetch-Site", "same-origin, cross-site")], 403),
    ([("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Site", "same-origin")], 403),
    ([("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Site", "same-origin")], 403),
    ([("Sec-Fetch-Site", "cross-site\t")], 403),  # whitespace around a value is no part of it
    ([("Sec-Fetch-Site", "same-origin  ")], SERVED),
    ([("Sec-Fetch-Site", "SAME-ORIGIN"), ("Origin", "http://localhost:{port}")], SERVED),  # the Origin rules
]


@pytest.mark.parametrize(
    ("fetch", "expected"),
    FETCHES,
    ids=[" ".join(f"{k}={v}" for k, v in f) or "(none)" for f, _ in FETCHES],
)
def test_both_faces_judge_fetch_metadata_alike(
    face: Face, fetch: list[tuple[str, str]], expected: int
) -> None:
    headers = [("Host", f"127.0.0.1:{face.port}"), *((k, v.format(port=face.port)) for k, v in fetch)]
    status, body = face.send(face.request(headers))
    assert status == expected, (face.name, fetch, status, body)
    if expected != SERVED:
        assert body["error"]["code"] == "ORIGIN_NOT_ALLOWED", body  # type: ignore[index]


def test_a_wrong_type_is_refused_before_its_body_is_asked_for(face: Face) -> None:
    # With ``Expect: 100-continue`` a client waits to be asked for the body: the MCP face asked
    # ("100 Continue"), read it, and only then refused the type; coffer-api refuses at once.
    request = face.post([("Content-Type", "text/plain"), ("Expect", "100-continue")])
    head = request.partition(b"\r\n\r\n")[0] + b"\r\n\r\n"  # the body is never sent
    with socket.create_connection(("127.0.0.1", face.port), timeout=60) as sock:
        sock.sendall(head)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 415 "), answer[:300]


def test_a_body_past_the_bound_is_413_naming_the_limit_in_both_faces(face: Face) -> None:
    # The MCP face's 413 said no limit (``details`` empty); coffer-api's says it.
    request = face.post([("Content-Type", "application/json")])
    head = request.partition(b"\r\n\r\n")[0].replace(b"Content-Length: ", b"X-Was: ")
    status, body = face.send(head + b"\r\nContent-Length: 10000000000\r\n\r\n")
    assert status == 413, (face.name, status, body)
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "REQUEST_TOO_LARGE", body
    assert error["details"] == {"limit": MAX_REQUEST_BODY_BYTES}, body


# A demanding client's or an attacker's variants of the request each face serves: (what is done to
# it, what it gets). Both faces judged each of these alike already; kept here so they stay so.
HOST = b"Host: 127.0.0.1:{port}"
VARIANTS = [
    ("header name upper case", lambda r: r.replace(b"Host:", b"HOST:"), SERVED),
    ("header name lower case", lambda r: r.replace(b"Host:", b"host:"), SERVED),
    (
        "spaces around the value",
        lambda r: r.replace(HOST + b"\r\n", b"Host:    " + HOST[6:] + b"   \r\n"),
        SERVED,
    ),
    ("tabs around the value", lambda r: r.replace(b"Host: ", b"Host:\t"), SERVED),
    ("a space before the colon", lambda r: r.replace(b"Host:", b"Host :"), 400),
    ("a folded line", lambda r: r.replace(HOST, b"Host: evil.example\r\n " + HOST[6:]), 400),
    ("bare LF line ends", lambda r: r.replace(b"\r\n", b"\n"), 400),
    (
        "Transfer-Encoding and Content-Length",
        lambda r: r.replace(
            b"Connection:", b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\nConnection:"
        ),
        400,
    ),
    (
        "two Content-Length",
        lambda r: r.replace(b"Connection:", b"Content-Length: 0\r\nContent-Length: 0\r\nConnection:"),
        400,
    ),
    (
        "Transfer-Encoding gzip",
        lambda r: r.replace(b"Connection:", b"Transfer-Encoding: gzip\r\nConnection:"),
        400,
    ),
    ("HTTP/1.0", lambda r: r.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1), SERVED),
    (
        "HTTP/1.0 without Host",
        lambda r: r.replace(b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", 1).replace(HOST + b"\r\n", b""),
        421,
    ),
]


@pytest.mark.parametrize(("change", "expected"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_both_faces_judge_variants_of_a_served_request_alike(face: Face, change: Any, expected: int) -> None:
    request = change(face.request([("Host", "127.0.0.1:{port}")]))  # the port put in below
    status, body = face.send(request.replace(b"{port}", str(face.port).encode()))
    assert status == expected, (face.name, request[:300], status, body)
    if status != SERVED:
        assert set(body) == {"error"}, body  # the envelope, not plain text


def test_pipelined_requests_are_each_judged(face: Face) -> None:
    # Two requests in one write: the second is judged on its own (its foreign Host refused), and a
    # third after it is not read as part of either.
    served = face.request([("Host", f"127.0.0.1:{face.port}")]).replace(b"Connection: close\r\n", b"")
    foreign = served.replace(f"Host: 127.0.0.1:{face.port}".encode(), b"Host: evil.example")
    with socket.create_connection(("127.0.0.1", face.port), timeout=60) as sock:
        sock.sendall(served + foreign + face.request([("Host", f"127.0.0.1:{face.port}")]))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", data) == [b"200", b"421", b"200"], data[:3000]


@pytest.mark.parametrize(
    ("origin", "expected"),
    [("http://evil.example", 403), ("http://localhost:9", 403), ("http://localhost:{port}", 405)],
)
def test_a_preflight_is_judged_alike(face: Face, origin: str, expected: int) -> None:
    # No CORS origin is configured: a foreign one (another port too) is refused by the Origin rule,
    # the server's own reaches the app, which has no OPTIONS (coffer-api: without --cors-origin).
    path = "/api/v1/memory_stores" if face.name == "rest" else "/mcp"
    request = (
        f"OPTIONS {path} HTTP/1.1\r\nHost: 127.0.0.1:{face.port}\r\nOrigin: {origin.format(port=face.port)}\r\n"
        "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n"
        "Connection: close\r\n\r\n"
    )
    status, body = face.send(request.encode())
    assert status == expected, (face.name, origin, status, body)
    assert "error" in body, body

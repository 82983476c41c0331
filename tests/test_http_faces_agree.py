"""``coffer-api`` and ``coffer-mcp --transport streamable-http`` refuse the same requests alike.

One table of ``Host`` and ``Origin`` headers, and a target past what the HTTP parser reads, sent byte
for byte to a real server of each face on 127.0.0.1 (a client library would normalise them: one
``Host``, lower case, a port). The faces judged these differently: the MCP face took a second
``Host`` or ``Origin`` when the first was good and refused ``LOCALHOST``, ``localhost.`` and a
``Host`` without a port, which ``coffer-api`` serves; both answered a target over 64 KiB as "not
valid HTTP".
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import Served
from test_mcp_handshake import initialize

from coffer_memory._http_bounds import MAX_TARGET_BYTES

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

    def send(self, request: bytes) -> tuple[int, dict[str, object]]:
        """``request`` as it is: the answer's status and its JSON body (``{}`` when it is none)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=60) as sock:
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
    (["http://localhost"], SERVED),
    (["http://LOCALHOST:{port}"], SERVED),
    (["https://localhost:9"], SERVED),  # any loopback origin, on any port
    (["http://[::1]:{port}"], SERVED),
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

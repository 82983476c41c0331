"""``X-Forwarded-For`` and ``X-Forwarded-Proto`` sent to either face change nothing it logs or
decides, unless the user names the proxy they come from (``--forwarded-allow-ips``).

uvicorn trusts both headers from 127.0.0.1 by default (``proxy_headers=True``,
``forwarded_allow_ips="127.0.0.1"``): any local page or process, sending them, was logged as
another address, and its ``X-Forwarded-Proto: https`` made the web view's links, the redirects
and the web view's cookie those of an https server that is not there. Real servers on 127.0.0.1,
raw sockets.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import Served
from test_attack_loopback_origins import assert_refused_at_start

FORGED = [
    ("X-Forwarded-For", "203.0.113.7"),
    ("X-Forwarded-Proto", "https"),
    ("X-Forwarded-Host", "evil.example"),
    ("Forwarded", "for=203.0.113.7;proto=https;host=evil.example"),
]
TOKEN = "forwarded-secret"


def _server(name: str, home: Path, args: list[str] = ()) -> Served:  # type: ignore[assignment]
    env = {**os.environ, "COFFER_HOME": str(home)}
    if name == "rest":
        command = [str(Path(sys.executable).parent / "coffer-api"), "--access-log", "--log-level", "info"]
    else:
        command = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
        command += ["--log-level", "INFO"]
    return Served([*command, *args], env)


def _get(port: int, target: str, headers: list[tuple[str, str]]) -> tuple[int, str, bytes]:
    """``GET target`` with ``headers``: the status, the head (lower-case names), the body."""
    lines = [f"GET {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers)]
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall("\r\n".join([*lines, "Connection: close", "", ""]).encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), head.decode("latin-1").lower(), body


def _logged(server: Served, needle: str, deadline_s: float = 10.0) -> str:
    """What the server logged (uvicorn's access lines go to stdout, the rest to stderr) once it
    holds ``needle`` (an access line is written after the answer)."""
    end = time.monotonic() + deadline_s
    while needle not in (logged := server.stdout() + server.stderr()) and time.monotonic() < end:
        time.sleep(0.05)
    return logged


@pytest.fixture(scope="module", params=["rest", "mcp"])
def face(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Served]]:
    home = tmp_path_factory.mktemp(f"forwarded-{request.param}") / "home"
    with _server(request.param, home) as server:
        yield request.param, server


def test_a_forged_forwarded_address_or_scheme_is_not_believed(face: tuple[str, Served]) -> None:
    name, server = face
    # A redirect names the scheme and host the server believes it is reached by.
    target = "/" if name == "rest" else "/mcp/"
    status, head, _ = _get(server.port, target, FORGED)
    assert status in (307, 308), (status, head)
    location = re.search(r"\r\nlocation: (\S+)", head)
    assert location is not None, head
    assert location.group(1).startswith(f"http://127.0.0.1:{server.port}/"), head
    # The access log names the address the connection came from, not one a header claims.
    logged = _logged(server, f'"GET {target} HTTP/1.1" {status}')
    assert f'"GET {target} HTTP/1.1" {status}' in logged, logged[-2000:]
    assert "203.0.113.7" not in logged, logged[-2000:]
    assert re.search(rf'127\.0\.0\.1:\d+ - "GET {re.escape(target)} HTTP/1\.1" {status}', logged), logged[
        -2000:
    ]


def test_the_web_view_links_to_itself_over_the_scheme_it_is_served_by(tmp_path: Path) -> None:
    with _server("rest", tmp_path / "home", ["--token", TOKEN]) as server:
        # The token given once: the answer sets the view's cookie, Secure only over https (a
        # browser given a Secure cookie over http keeps none: the view asked for the token again).
        status, head, _ = _get(server.port, f"/ui?token={TOKEN}", FORGED)
        assert status == 303, head
        cookie = re.search(r"\r\nset-cookie: ([^\r]+)", head)
        assert cookie is not None and "coffer_ui=" in cookie.group(1), head
        assert "secure" not in cookie.group(1), head
        page_cookie = cookie.group(1).split(";", 1)[0]
        status, _, body = _get(server.port, "/ui", [*FORGED, ("Cookie", page_cookie)])
        assert status == 200, body[:500]
        links = re.findall(rb'(?:href|src)="(https?://[^"]+)"', body)
        assert links, body[:2000]
        assert all(link.startswith(f"http://127.0.0.1:{server.port}/".encode()) for link in links), links


@pytest.mark.parametrize("name", ["rest", "mcp"])
def test_a_named_proxy_is_believed(name: str, tmp_path: Path) -> None:
    # The user who runs the server behind a proxy on this machine says so.
    with _server(name, tmp_path / "home", ["--forwarded-allow-ips", "127.0.0.1"]) as server:
        target = "/" if name == "rest" else "/mcp/"
        status, head, _ = _get(server.port, target, FORGED[:2])
        assert re.search(rf"\r\nlocation: https://127\.0\.0\.1:{server.port}/", head), head
        logged = _logged(server, "203.0.113.7")
        assert re.search(rf'203\.0\.113\.7:\d+ - "GET {re.escape(target)} HTTP/1\.1" {status}', logged), (
            logged[-2000:]
        )


@pytest.mark.parametrize("name", ["rest", "mcp"])
def test_a_malformed_proxy_address_is_one_line_and_status_2(name: str, tmp_path: Path) -> None:
    env_name = "COFFER_API_FORWARDED_ALLOW_IPS" if name == "rest" else "COFFER_MCP_FORWARDED_ALLOW_IPS"
    cases = [(["--forwarded-allow-ips", "127.0.0.1,proxy.lan"], {}), ([], {env_name: "10.0.0.0/33"})]
    assert_refused_at_start(name, tmp_path / "home", cases, "is not an IP address")

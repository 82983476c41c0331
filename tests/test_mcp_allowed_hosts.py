"""``coffer-mcp --transport streamable-http`` bound beyond loopback, over real sockets: with
``--allowed-host`` it judges ``Host`` and ``Origin`` by ``coffer-api``'s rule; without it it checks
neither (the MCP SDK's choice, kept) and says so when it starts.

It had no ``--allowed-host``: a user who bound it to a LAN address for a second machine had no
DNS-rebinding protection at all, and no way to get one. The server here is bound to this machine's
first non-loopback address (``hostname -I``), else to ``0.0.0.0``, and reached at that address.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import Served
from test_http_faces_agree import INIT, exchange

ARGS = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]


def _lan_address() -> str:
    """The first IPv4 address ``hostname -I`` lists that is not loopback, else ``0.0.0.0``."""
    try:
        listed = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        listed = []
    for address in listed:
        if "." in address and not address.startswith("127."):
            with socket.socket() as probe:
                try:
                    probe.bind((address, 0))
                except OSError:
                    continue
                return address
    return "0.0.0.0"


BOUND = _lan_address()
REACH = "127.0.0.1" if BOUND == "0.0.0.0" else BOUND  # where a client connects
WARNING = "without --allowed-host: Host and Origin are not checked"


def post(port: int, headers: list[tuple[str, str]]) -> tuple[int, dict[str, object]]:
    """An initialize sent to the server as it is (``headers`` besides the framing): status, JSON."""
    lines = [
        "POST /mcp HTTP/1.1",
        *(f"{k}: {v}" for k, v in headers),
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(INIT)}",
        "Connection: close",
    ]
    return exchange((REACH, port), "\r\n".join([*lines, "", ""]).encode("latin-1") + INIT)


def _serve(tmp: Path, extra: list[str], env: dict[str, str] | None = None) -> Served:
    home = {**os.environ, "COFFER_HOME": str(tmp / "home"), **(env or {})}
    return Served([*ARGS, "--host", BOUND, *extra], home)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("allowed")
    # One name from the option, one from the environment; a name:port pair on another port.
    extra = ["--allowed-host", "box.lan", "--allowed-host", "pinned.lan:1"]
    with _serve(tmp, extra, {"COFFER_MCP_ALLOWED_HOSTS": "from-env.lan, other.lan"}) as server:
        yield server


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with _serve(tmp_path_factory.mktemp("open"), []) as server:
        yield server


HOSTS = [
    ("box.lan:{port}", 200),
    ("BOX.LAN.", 200),  # a host name in any case, fully qualified, any port
    ("from-env.lan:{port}", 200),
    ("other.lan", 200),
    (f"{REACH}:{{port}}", 200),  # the address the connection arrived at
    ("localhost:{port}", 200),  # loopback names are always served (an SSH tunnel)
    ("evil.example", 421),
    ("box.lan.evil.example:{port}", 421),
    ("pinned.lan:{port}", 421),  # allowed on port 1 only
    ("pinned.lan:1", 200),
]


@pytest.mark.parametrize(("host", "expected"), HOSTS)
def test_bound_beyond_loopback_with_allowed_hosts_host_is_judged(
    guarded: Served, host: str, expected: int
) -> None:
    status, body = post(guarded.port, [("Host", host.format(port=guarded.port))])
    assert status == expected, (host, status, body)
    if expected == 421:
        error = body["error"]
        assert isinstance(error, dict) and error["code"] == "HOST_NOT_ALLOWED", body
        assert "--allowed-host" in error["message"], body  # what to do about it


ORIGINS = [
    ("http://box.lan:{port}", 200),
    ("https://other.lan:{port}", 200),  # an allowed name, on the server's port
    ("https://other.lan", 403),  # another port (443) of an allowed name is another server
    ("http://box.lan:3000", 403),
    (f"http://{REACH}:{{port}}", 200),
    ("http://evil.example", 403),
    ("http://box.lan@evil.example", 403),
    ("null", 403),
]


@pytest.mark.parametrize(("origin", "expected"), ORIGINS)
def test_bound_beyond_loopback_with_allowed_hosts_origin_is_judged(
    guarded: Served, origin: str, expected: int
) -> None:
    headers = [("Host", f"box.lan:{guarded.port}"), ("Origin", origin.format(port=guarded.port))]
    status, body = post(guarded.port, headers)
    assert status == expected, (origin, status, body)
    if expected == 403:
        assert body["error"]["code"] == "ORIGIN_NOT_ALLOWED", body  # type: ignore[index]


def test_bound_beyond_loopback_with_allowed_hosts_another_sites_request_is_refused(guarded: Served) -> None:
    status, body = post(guarded.port, [("Host", f"box.lan:{guarded.port}"), ("Sec-Fetch-Site", "cross-site")])
    assert status == 403 and body["error"]["code"] == "ORIGIN_NOT_ALLOWED", body  # type: ignore[index]
    assert WARNING not in guarded.stderr()


def test_bound_beyond_loopback_without_allowed_hosts_checks_nothing_and_says_so(open_server: Served) -> None:
    # Today's behaviour, kept (a user behind a proxy that checks Host itself), and now said.
    assert WARNING in open_server.stderr()
    for host in ("evil.example", f"{REACH}:{open_server.port}"):
        assert post(open_server.port, [("Host", host)])[0] == 200, host


def test_a_malformed_allowed_host_is_one_line_and_status_2(tmp_path: Path) -> None:
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [*ARGS, "--host", BOUND, "--port", "0", "--allowed-host", "box lan"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "not a host name or host:port: 'box lan'" in done.stderr, done.stderr
    assert not (tmp_path / "home").exists()  # refused before the home was made


def test_bound_to_loopback_an_allowed_host_is_served_too(tmp_path: Path) -> None:
    # As coffer-api's --allowed-host: a proxy on this machine that forwards its own name.
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    with Served([*ARGS, "--allowed-host", "box.lan"], env) as server:
        for host, expected in (("box.lan", 200), ("evil.example", 421), (f"127.0.0.1:{server.port}", 200)):
            lines = ["POST /mcp HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
            lines += ["Accept: application/json, text/event-stream", f"Content-Length: {len(INIT)}"]
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
                sock.sendall("\r\n".join([*lines, "Connection: close", "", ""]).encode() + INIT)
                status = int(sock.recv(65536).split()[1])
            assert status == expected, host
        assert WARNING not in server.stderr()

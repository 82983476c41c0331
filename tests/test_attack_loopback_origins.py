"""A page of another server on this machine (a dev server at ``http://localhost:3000``) may not
drive either face: an ``Origin`` passes when it is the server's own (any loopback name, its port),
or one the user lists with ``--allowed-origin`` (or ``--cors-origin`` for ``coffer-api``).

Both faces passed any loopback ``Origin`` on any port: every local web app's pages (and any page
that got script into one) could send ``coffer-api`` simple requests (``GET
/api/v1/agents?check_mcp=true`` starts processes) and ``coffer-mcp`` calls. Real servers on
127.0.0.1, raw sockets; the rule is ``coffer_memory._http_hosts.HostCheck.origin_allowed``.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path

import pytest
from served import Served
from test_http_faces_agree import Face

DEV = "http://localhost:3000"


def _command(name: str) -> tuple[list[str], str]:
    """The face's command and its ``--allowed-origin`` environment variable."""
    if name == "rest":
        return [
            str(Path(sys.executable).parent / "coffer-api"),
            "--log-level",
            "warning",
        ], "COFFER_API_ALLOWED_ORIGINS"
    command = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    return command, "COFFER_MCP_ALLOWED_ORIGINS"


def _status(face: Face, origin: str) -> int:
    headers = [("Host", f"127.0.0.1:{face.port}"), ("Origin", origin.format(port=face.port))]
    status, body = face.send(face.request(headers))
    if status == 403:
        assert body["error"]["code"] == "ORIGIN_NOT_ALLOWED", body  # type: ignore[index]
    return status


@pytest.mark.parametrize("name", ["rest", "mcp"])
def test_another_local_port_is_served_only_when_listed(name: str, tmp_path: Path) -> None:
    command, env_name = _command(name)
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    with Served(command, env) as server:
        face = Face(name, server)
        assert _status(face, DEV) == 403  # served before
        assert _status(face, "http://127.0.0.1:{port}") == 200
    # Listed: that origin exactly (any case, a trailing slash), not its neighbours.
    for args, extra in (
        (["--allowed-origin", "HTTP://LocalHost:3000/", "--allowed-origin", "https://tool.example"], {}),
        ([], {env_name: "https://tool.example, http://localhost:3000"}),
    ):
        with Served([*command, *args], {**env, **extra}) as server:
            face = Face(name, server)
            assert _status(face, DEV) == 200, (args, extra)
            assert _status(face, "https://tool.example") == 200, (args, extra)
            for other in ("http://localhost:3001", "https://localhost:3000", "http://127.0.0.1:3000"):
                assert _status(face, other) == 403, (args, extra, other)
            assert _status(face, "http://localhost:{port}") == 200


def assert_refused_at_start(
    name: str, home: Path, cases: list[tuple[list[str], dict[str, str]]], said: str
) -> None:
    """The face started with each case's options and environment exits with status 2 and one line
    saying ``said``, no traceback."""
    command = _command(name)[0]
    env = {**os.environ, "COFFER_HOME": str(home)}
    for args, extra in cases:
        done = subprocess.run(
            [*command, *args, "--port", "0"],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, (args, extra, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and said in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["rest", "mcp"])
@pytest.mark.parametrize("value", ["localhost:3000", "http://localhost:3000/app", "null", "http://a@b"])
def test_a_malformed_allowed_origin_is_one_line_and_status_2(name: str, value: str, tmp_path: Path) -> None:
    env_name = _command(name)[1]
    cases = [(["--allowed-origin", value], {}), ([], {env_name: value})]
    assert_refused_at_start(name, tmp_path / "home", cases, "not an origin")


@pytest.mark.parametrize("value", ["*", "app.example", "https://app.example/path", "null"])
def test_a_malformed_cors_origin_is_one_line_and_status_2(value: str, tmp_path: Path) -> None:
    """``--cors-origin`` took anything: ``garbage`` silently matched no page, and ``*`` turned on
    Starlette's allow-all CORS while the Origin check still refused every page of another origin
    (it looked like "CORS for everyone" and let no one in). It is checked as ``--allowed-origin``."""
    cases = [(["--cors-origin", value], {}), ([], {"COFFER_API_CORS_ORIGINS": value})]
    assert_refused_at_start("rest", tmp_path / "home", cases, "--cors-origin")


def _cors_answer(port: int, method: str, origin: str) -> tuple[int, str | None]:
    """The status and ``Access-Control-Allow-Origin`` of a CORS preflight (``OPTIONS``) or a GET
    from a page of ``origin``, as a browser sends them."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Origin": origin}
    if method == "OPTIONS":
        headers |= {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    try:
        conn.request(method, "/api/v1/memory_stores", headers=headers)
        answer = conn.getresponse()
        answer.read()
        return answer.status, answer.getheader("access-control-allow-origin")
    finally:
        conn.close()


@pytest.mark.parametrize("spelled", ["HTTPS://App.Example:443/", "https://app.example/"])
def test_a_cors_origin_is_compared_as_a_browser_sends_one(spelled: str, tmp_path: Path) -> None:
    """``--cors-origin`` spelled in another case, with the scheme's default port or a trailing
    slash, is the origin a browser sends (``https://app.example``: RFC 6454 serializes it lower
    case, without the default port). The Origin rule compared it so and let its requests through,
    but the CORS answer compared it as typed: the preflight was ``403`` and no answer said
    ``Access-Control-Allow-Origin``, so the page could neither send nor read."""
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    command = _command("rest")[0]
    for args, extra in ((["--cors-origin", spelled], {}), ([], {"COFFER_API_CORS_ORIGINS": spelled})):
        with Served([*command, *args], {**env, **extra}) as server:
            for method in ("OPTIONS", "GET"):
                status, allowed = _cors_answer(server.port, method, "https://app.example")
                assert (status, allowed) == (200, "https://app.example"), (spelled, args, method)
            assert _cors_answer(server.port, "GET", "https://evil.example")[0] == 403

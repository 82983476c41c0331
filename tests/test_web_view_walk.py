"""The web view as a browser, a link checker and an uptime probe meet it, on a real ``coffer-api``:
a recall box filled past its bound answers an HTML error page (it answered the REST API's JSON
envelope), and ``HEAD`` of a page answers as its ``GET`` without the body (it was ``405``: HTTP
asks every general-purpose server for ``HEAD`` wherever it serves ``GET``)."""

from __future__ import annotations

import http.client
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import Served

from coffer_memory import MemoryService


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    home = tmp_path_factory.mktemp("web-walk") / "home"
    with MemoryService(home) as svc:
        svc.remember("Deploy with make ship.", title="How to deploy", scope="global")
    env = {**os.environ, "COFFER_HOME": str(home)}
    with Served([str(Path(sys.executable).parent / "coffer-api"), "--log-level", "warning"], env) as server:
        yield server.port


def _ask(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def test_a_query_past_the_bound_is_an_html_error_page(port: int) -> None:
    status, headers, body = _ask(port, "GET", "/ui/search?q=" + "a" * 1001)
    assert status == 422 and headers["content-type"].startswith("text/html"), (status, headers, body[:200])
    page = body.decode()
    assert "INVALID_INPUT" in page and "1000 characters" in page and '"error":' not in page
    status, _, _ = _ask(port, "GET", "/ui/search?q=" + "a" * 1000)  # the bound itself is served
    assert status == 200


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/ui", 200),
        ("/ui/stores/global", 200),
        ("/ui/search?q=deploy", 200),
        ("/ui/stores/nosuch", 404),
        ("/", 307),
    ],
)
def test_head_answers_as_get_without_a_body(port: int, path: str, status: int) -> None:
    got, headers, body = _ask(port, "HEAD", path)
    want, get_headers, _ = _ask(port, "GET", path)
    assert (got, want) == (status, status) and body == b"", (path, got, body[:200])
    assert headers.get("content-type") == get_headers.get("content-type")
    assert headers.get("location") == get_headers.get("location")
    assert headers.get("content-security-policy") == get_headers.get("content-security-policy")

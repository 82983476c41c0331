"""The REST face attacked with requests a browser, a proxy or a hostile local program can send.

Raw bytes to a real ``coffer-api`` on 127.0.0.1 where a client library would tidy the request
(repeated headers); FastAPI's TestClient where the app alone decides (CORS preflights, framing).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from fastapi.testclient import TestClient
from served import Served

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app

API = "/api/v1/memory_stores"
ORIGIN = "https://app.example"


@pytest.fixture
def served(tmp_home: Path) -> Iterator[int]:
    """The port of a real ``coffer-api`` serving ``tmp_home`` on 127.0.0.1."""
    exe = Path(sys.executable).parent / "coffer-api"
    with Served([str(exe), "--log-level", "warning"], {**os.environ, "COFFER_HOME": str(tmp_home)}) as server:
        yield server.port


def raw_get(port: int, target: str, *headers: tuple[str, str]) -> tuple[int, dict[str, str], bytes]:
    """``GET target`` sent byte for byte (headers repeated as given): status, headers, body."""
    lines = [f"GET {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers), "Connection: close", "", ""]
    return raw_send(port, "\r\n".join(lines).encode("latin-1"))


def raw_send(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """``request`` written as it is; the answer's status, headers and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), fields, body


def envelope(status: int, body: bytes, code: str) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(body)["error"]
    assert set(error) == {"code", "message", "details"} and error["code"] == code, (status, body)
    return error


# -- repeated Host and Origin headers ---------------------------------------------------------
@pytest.mark.parametrize(
    "hosts", [("evil.example", "127.0.0.1"), ("127.0.0.1", "evil.example"), ("127.0.0.1", "127.0.0.1")]
)
def test_two_host_headers_are_refused_in_either_order(served: int, hosts: tuple[str, str]) -> None:
    # The guard read the last Host and Starlette the first: with a rebound name first, the
    # request passed and "/" sent the browser on to http://evil.example/ui.
    for target in (f"{API}/global/recall?query=x", f"{API}/global/facts", "/", "/ui"):
        status, fields, body = raw_get(served, target, *(("Host", h) for h in hosts))
        assert status == 421, (target, hosts, status, fields.get("location"))
        envelope(status, body, "HOST_NOT_ALLOWED")
    assert raw_get(served, "/", ("Host", "127.0.0.1"))[1]["location"] == "http://127.0.0.1/ui"


@pytest.mark.parametrize("target", [f"{API}/global/recall?query=x", f"{API}/global/facts", "/ui"])
def test_an_absolute_form_target_is_served_by_the_host_it_names(served: int, target: str) -> None:
    # RFC 9112 3.2.2: a server ignores Host when the target is absolute ("GET http://name/path")
    # and takes the target's host. The guard read Host: a request naming evil.example was served.
    status, _, body = raw_get(served, f"http://evil.example{target}", ("Host", "127.0.0.1"))
    assert status == 421, (target, status)
    envelope(status, body, "HOST_NOT_ALLOWED")
    status, _, body = raw_get(served, f"http://127.0.0.1:{served}{target}", ("Host", "evil.example"))
    assert status == 200, (target, status, body[:300])


def test_two_origin_headers_are_refused(served: int) -> None:
    origins = (("Origin", "http://evil.example"), ("Origin", "http://127.0.0.1"))
    for target in (f"{API}/global/recall?query=x", "/ui"):
        status, _, body = raw_get(served, target, ("Host", "127.0.0.1"), *origins)
        assert status == 403, target
        envelope(status, body, "ORIGIN_NOT_ALLOWED")


# -- requests that are not HTTP ------------------------------------------------------------------
@pytest.mark.parametrize(
    "request_bytes",
    [
        b"PROPFIND2 /api/v1/memory_stores HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",  # not a method
        b"GET /ui/stores/\xed\xa0\x80 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",  # raw bytes in the target
        b"GET /ui HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: coffer_ui=\x00\r\n\r\n",  # NUL in a header
    ],  # (a target longer than httptools parses is 414: tests/test_http_faces_agree.py)
)
def test_a_request_that_is_not_http_is_refused_with_the_envelope(served: int, request_bytes: bytes) -> None:
    # uvicorn answers these before the app sees them: "Invalid HTTP request received." in plain text.
    status, fields, body = raw_send(served, request_bytes)
    assert status == 400 and fields["content-type"] == "application/json", body
    envelope(status, body, "INVALID_INPUT")
    assert raw_get(served, API, ("Host", "127.0.0.1"))[0] == 200  # and the server serves on


# -- CORS preflights ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("asked", "refused"),
    [
        ({"Access-Control-Request-Method": "PROPFIND"}, ["method"]),
        (
            {
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-evil, content-type",
            },
            ["headers"],
        ),
        (
            {"Access-Control-Request-Method": "GET", "Access-Control-Request-Private-Network": "true"},
            ["private-network"],
        ),
    ],
)
def test_a_refused_preflight_is_the_error_envelope(
    svc: MemoryService, asked: dict[str, str], refused: list[str]
) -> None:
    # Starlette answered these with a plain-text "Disallowed CORS method" 400.
    with TestClient(create_app(svc, token="s3cret", cors_origins=[ORIGIN])) as client:
        r = client.options(f"{API}/global/facts", headers={"Origin": ORIGIN, **asked})
        error = envelope(r.status_code, r.content, "ORIGIN_NOT_ALLOWED")
        assert r.status_code == 403 and r.headers["content-type"] == "application/json"
        assert error["details"]["refused"] == refused and error["details"]["origin"] == ORIGIN
        granted = client.options(
            f"{API}/global/facts", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "DELETE"}
        )
        assert granted.status_code == 200 and granted.headers["access-control-allow-origin"] == ORIGIN


# -- framing ------------------------------------------------------------------------------------
def test_no_page_of_the_server_can_be_framed(client: TestClient) -> None:
    # /docs framed by another page: a click lands on "Try it out" of DELETE .../facts, and
    # Swagger UI sends it from the server's own origin, which the guard lets through.
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect", "/openapi.json", "/ui", "/ui/static/app.js"):
        r = client.get(path)
        assert r.status_code == 200, path
        assert r.headers.get_list("x-frame-options") == ["DENY"], path
        [policy] = r.headers.get_list("content-security-policy")
        assert "frame-ancestors 'none'" in policy, path
        assert r.headers.get_list("x-content-type-options") == ["nosniff"], path
    redirect = client.get("/", follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["x-frame-options"] == "DENY"


def test_every_api_answer_says_nosniff(client: TestClient) -> None:
    # A fact's text comes back in JSON, JSONL and zip answers; only the pages said nosniff, so a
    # browser was free to take an API answer for another type than the one it was sent as.
    made = client.post(f"{API}/global/facts", json={"text": "<script>alert(1)</script> deploys"})
    answers = {
        "remember": made,
        "fact": client.get(f"{API}/global/facts/{made.json()['fact']['id']}"),
        "recall (shortcut)": client.get(f"{API}/global/recall", params={"query": "deploys"}),
        "export": client.get("/api/v1/export", params={"format": "jsonl"}),
        "not found": client.get(f"{API}/global/facts/01M8MJSG9PX20EC3PSBHZ6R372"),
        "no route": client.get("/api/v1/nothing"),
        "refused": client.post(f"{API}/global/facts", content=b"x", headers={"Content-Type": "text/plain"}),
    }
    assert {name: r.headers.get_list("x-content-type-options") for name, r in answers.items()} == {
        name: ["nosniff"] for name in answers
    }


# -- bodies -------------------------------------------------------------------------------------
def test_a_deeply_nested_body_with_a_surrogate_escape_is_invalid_input_not_a_500(client: TestClient) -> None:
    # The guard parses a body holding "\ud800" to find where it is; Python's json (and the walk
    # over what it parsed) gave up with RecursionError, which answered 500 INTERNAL.
    depth = 100_000
    body = b'{"x": ' + b"[" * depth + b"]" * depth + b', "text": "a\\ud800"}'
    r = client.post(f"{API}/global/facts", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    envelope(r.status_code, r.content, "INVALID_INPUT")
    assert client.get(f"{API}/global").json()["fact_count"] == 0


# -- blind loads by another site's page -----------------------------------------------------------
def test_a_load_another_sites_page_made_without_origin_is_refused(client: TestClient) -> None:
    # <img src="http://127.0.0.1:8765/api/v1/agents?check_mcp=true"> on any site: the browser sends
    # no Origin (a no-cors load) but marks the request Sec-Fetch-Site: cross-site; the API
    # started processes for it before.
    for site in ("cross-site", "same-site"):
        for mode in ("no-cors", "cors", "navigate"):
            r = client.get(
                "/api/v1/agents?check_mcp=true", headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode}
            )
            assert r.status_code == 403, (site, mode)
            assert r.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"
    r = client.get(f"{API}/global/recall?query=x", headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403


def test_browsers_own_loads_and_clients_without_fetch_metadata_are_served(client: TestClient) -> None:
    plain = client.get(f"{API}/global/recall?query=x")
    assert plain.status_code == 200  # curl, the hook, scripts: no Sec-Fetch-* at all
    for site in ("same-origin", "none"):  # the web view's own requests; a URL the user typed
        r = client.get(
            f"{API}/global/recall?query=x", headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "cors"}
        )
        assert r.status_code == 200, site
    # A link to the web view followed from another site is the user's own navigation.
    page = client.get("/ui", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"})
    assert page.status_code == 200
    page = client.get(
        "/ui",
        headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"},
    )
    assert page.status_code == 200
    # ...but an <img> or <iframe> load of a page is not.
    assert (
        client.get("/ui", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}).status_code
        == 403
    )


def test_a_link_in_a_page_of_the_view_into_the_api_is_refused(client: TestClient) -> None:
    # The web view renders a fact's own links; [x](/api/v1/agents?check_mcp=true) in a fact is a
    # same-origin navigation when clicked, and the API started every registered coffer-mcp for it.
    clicked = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    for path in ("/api/v1/agents?check_mcp=true", f"{API}/global/recall?query=x"):
        r = client.get(path, headers=clicked)
        assert r.status_code == 403, path
        assert r.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"
    # The same address typed by the user, or fetched by the view's own script, is served.
    typed = {**clicked, "Sec-Fetch-Site": "none"}
    assert client.get(f"{API}/global/recall?query=x", headers=typed).status_code == 200
    fetched = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}
    assert client.get(f"{API}/global/recall?query=x", headers=fetched).status_code == 200
    # A link between the view's own pages stays a link.
    assert client.get("/ui", headers=clicked).status_code == 200


def test_a_page_another_site_frames_is_not_built(client: TestClient) -> None:
    # A hidden <iframe src=".../ui/search?q=..."> is a navigation too (Sec-Fetch-Mode: navigate),
    # so it passed as the user following a link: the recall ran, and the frame's load time told
    # the framing page whether the memory holds a word (frame-ancestors stops only the display).
    for dest in ("iframe", "frame", "object", "embed"):
        framed = client.get(
            "/ui/search?q=deploys",
            headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": dest},
        )
        assert framed.status_code == 403, dest
        assert framed.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"


def test_a_cross_site_request_with_an_allowed_origin_is_cors_business(tmp_home: Path) -> None:
    app = create_app(MemoryService(home=tmp_home), cors_origins=[ORIGIN])
    with TestClient(app) as c:
        headers = {"Origin": ORIGIN, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "cors"}
        r = c.get(f"{API}/global/recall?query=x", headers=headers)
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN


# -- header limits ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers",
    [
        [(f"X-H{i}", "v") for i in range(5_000)],  # httptools took them all
        [("X-Big", "a" * 200_000)],
        [(f"X-Part{i}", "b" * 8_000) for i in range(10)],  # each small, together past 64 KiB
    ],
    ids=["many", "one-huge", "many-large"],
)
def test_too_many_or_too_large_headers_are_refused_with_the_envelope(
    served: int, headers: list[tuple[str, str]]
) -> None:
    status, fields, body = raw_get(served, f"{API}/global/recall?query=x", ("Host", "127.0.0.1"), *headers)
    assert status == 400 and fields["content-type"] == "application/json", body[:200]
    envelope(status, body, "INVALID_INPUT")
    # Ordinary requests with a browser's share of headers are served, on the same server.
    usual = [(f"X-Usual{i}", "c" * 100) for i in range(40)]
    assert raw_get(served, f"{API}/global/recall?query=x", ("Host", "127.0.0.1"), *usual)[0] == 200


@pytest.mark.parametrize("where", ["header", "target"])
def test_a_head_that_never_ends_is_refused_before_it_is_held(served: int, where: str) -> None:
    # httptools keeps a header value (and the target) whole until it ends, and only then do the
    # bounds above see it: a header that never ended was held in memory, megabyte after megabyte,
    # before the token was checked. The server now answers 400 and closes while it is still coming.
    start = b"GET /api/v1/memory_stores/global/recall?query=x HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
    if where == "target":
        start = b"GET /api/v1/memory_stores/global/recall?query="
    answer, cut_off = b"", False
    with socket.create_connection(("127.0.0.1", served), timeout=60) as sock:
        try:
            sock.sendall(start)
            for _ in range(256):  # 16 MiB at the most
                sock.sendall(b"a" * 65536)
        except OSError:  # refused and closed while we were still sending
            cut_off = True
        with contextlib.suppress(OSError):  # the 400 may be lost to the reset: the close is the point
            while chunk := sock.recv(65536):
                answer += chunk
    # Before, every byte was taken and nothing came back (the recv above waited in vain).
    assert cut_off or answer.startswith(b"HTTP/1.1 400 Bad Request"), answer[:200]
    if answer:
        envelope(400, answer.partition(b"\r\n\r\n")[2], "INVALID_INPUT")


# -- a cwd naming a folder someone else laid out --------------------------------------------------
def test_a_cwd_whose_git_files_are_a_fifo_or_a_sparse_terabyte_neither_hangs_nor_fails(
    served: int, tmp_path: Path
) -> None:
    # Any folder may be a cwd: an unpacked archive (tar keeps FIFOs), another user's folder in
    # /tmp. A worktree's gitdir whose HEAD is a FIFO blocked the thread reading it for ever, and
    # every later recall queued behind it; a sparse HEAD of a terabyte was read whole (a 500,
    # MemoryError).
    gitdir = tmp_path / "gitdir"
    gitdir.mkdir()
    fifo = gitdir / "HEAD"
    os.mkfifo(fifo)
    worktree = tmp_path / "fifo-checkout"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {gitdir}\n")
    sparse = tmp_path / "sparse-checkout"
    (sparse / ".git").mkdir(parents=True)
    with (sparse / ".git" / "HEAD").open("wb") as head:
        head.truncate(1 << 40)
    try:
        answers = [
            raw_get(served, f"{API}/recall?query=deploys&cwd={cwd}", ("Host", "127.0.0.1"))
            for cwd in (worktree, sparse, worktree)
        ]
    finally:  # before the fix: let the blocked reader see the end of the FIFO
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    for status, _, body in answers:
        assert status == 200, body
    # The FIFO is no HEAD, so no repository; the sparse HEAD is a file (a detached checkout).
    assert json.loads(answers[0][2])["stores"] == json.loads(answers[2][2])["stores"] == ["global"]
    assert json.loads(answers[1][2])["stores"][-1] == "global"


def test_a_recall_in_a_partial_clone_whose_promisor_remote_is_a_command_runs_nothing(
    served: int, tmp_path: Path, tmp_home: Path, repo: Path
) -> None:
    # A partial clone fetches a missing object from its promisor remote by itself, even for
    # `git rev-list`, which resolving a new checkout runs once when the home knows a project (is
    # it a clone or a move of one?). The repository's config is the attacker's (an unpacked
    # archive): an `ext::` URL is a shell command, and it ran on a recall.
    with MemoryService(tmp_home) as svc:
        svc.remember("deploys go out on Tuesdays", cwd=repo)
    marker = tmp_path / "ran"
    checkout = tmp_path / "partial"
    checkout.mkdir()
    git(checkout, "init", "-q", "-b", "main")
    for key, value in (
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.promisor", "true"),
        ("remote.origin.url", f"ext::sh -c touch% {marker}"),
        ("protocol.ext.allow", "always"),
    ):
        git(checkout, "config", key, value)
    (checkout / ".git" / "refs" / "heads" / "main").write_text("1" * 40 + "\n")  # not in the clone
    status, _, body = raw_get(served, f"{API}/recall?query=deploys&cwd={checkout}", ("Host", "127.0.0.1"))
    assert status == 200, body
    assert json.loads(body)["stores"][-1] == "global"
    assert not marker.exists()

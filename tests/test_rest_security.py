"""What a web page (or anyone else) must not be able to do to coffer-api on 127.0.0.1.

DNS rebinding (a foreign Host), cross-site requests (a foreign Origin), blind cross-site "simple
requests" (text/plain, forms, multipart, no content type: no CORS preflight protects them), CORS,
the bearer token, 405 ``Allow``, lone surrogates in bodies, and the app mounted under a prefix.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_configs import isolated_agent_homes, write_claude, write_codex, write_opencode
from fastapi import FastAPI
from fastapi.testclient import TestClient
from served import Served

from coffer_memory import MemoryService
from coffer_memory._agents.homes import AgentHomes
from coffer_memory_fastapi import create_app

API = "/api/v1/memory_stores"
AGENTS = ("claude-code", "codex", "opencode")
JSON = {"Content-Type": "application/json"}
SIMPLE_CONTENT_TYPES = [
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    None,
]


def error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    details: dict[str, Any] = body["error"]["details"]
    return details


def fact_count(client: TestClient) -> int:
    count: int = client.get(f"{API}/global").json()["fact_count"]
    return count


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    """HOME and every agent's config folder in a temp dir, with the users' own config files."""
    return isolated_agent_homes(tmp_path, monkeypatch)


@pytest.fixture
def agent_files(homes: AgentHomes) -> dict[Path, bytes]:
    return {**write_claude(homes), **write_codex(homes), **write_opencode(homes)}


# -- Host: DNS rebinding -----------------------------------------------------------------------
@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8765", "localhost.attacker.example"])
def test_a_rebound_host_can_neither_read_nor_clear(
    client: TestClient, service: MemoryService, host: str
) -> None:
    service.remember("the deploy key lives in the vault", store="global")
    assert error(client.get(f"{API}/global/facts", headers={"Host": host}), 421, "HOST_NOT_ALLOWED") == {
        "host": host
    }
    error(client.delete(f"{API}/global/facts", headers={"Host": host}), 421, "HOST_NOT_ALLOWED")
    error(client.get("/openapi.json", headers={"Host": host}), 421, "HOST_NOT_ALLOWED")
    assert fact_count(client) == 1


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8765", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:8765", "[::1]:8765", "[::1]"],
)
def test_loopback_names_with_any_port_are_served(client: TestClient, host: str) -> None:
    assert client.get(API, headers={"Host": host}).status_code == 200


def test_configured_hosts_are_served(service: MemoryService) -> None:
    app = create_app(service, allowed_hosts=["coffer.lan", "box.lan:9000"])
    with TestClient(app) as c:
        assert c.get(API, headers={"Host": "coffer.lan:8765"}).status_code == 200
        assert c.get(API, headers={"Host": "box.lan:9000"}).status_code == 200
        error(c.get(API, headers={"Host": "box.lan:9001"}), 421, "HOST_NOT_ALLOWED")
        error(c.get(API, headers={"Host": "attacker.example"}), 421, "HOST_NOT_ALLOWED")
    with pytest.raises(ValueError):
        create_app(service, allowed_hosts=["not a host:port:x"])
    # "*" hands the Host check to a proxy in front; Origin and content types are still checked.
    with TestClient(create_app(service, allowed_hosts=["*"])) as c:
        assert c.get(API, headers={"Host": "anything.example"}).status_code == 200
        error(c.get(API, headers={"Origin": "https://evil.example"}), 403, "ORIGIN_NOT_ALLOWED")
        same_origin = {"Host": "coffer.example", "Origin": "https://coffer.example"}
        assert c.get(API, headers=same_origin).status_code == 200


@pytest.fixture
def served(tmp_home: Path) -> Iterator[str]:
    """``coffer-api`` in a subprocess bound to 127.0.0.2, which is loopback on Linux but not a
    loopback *name*: only the bound-address rule serves it."""
    exe = Path(sys.executable).parent / "coffer-api"
    args = [
        str(exe),
        "--host",
        "127.0.0.2",
        "--allowed-host",
        "coffer.lan",
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_API_ALLOWED_HOSTS": "other.lan:1234"}
    with Served(args, env) as server:
        assert server.base.startswith("http://127.0.0.2:")
        yield server.base


def test_coffer_api_serves_its_bound_address_and_allowed_hosts_only(served: str) -> None:
    with httpx.Client(base_url=served, timeout=10) as http:
        assert http.get(API).status_code == 200  # Host: 127.0.0.2:<port>
        assert http.get(API, headers={"Host": "coffer.lan"}).status_code == 200
        assert http.get(API, headers={"Host": "other.lan:1234"}).status_code == 200
        error(http.get(API, headers={"Host": "other.lan:1235"}), 421, "HOST_NOT_ALLOWED")
        r = http.delete(f"{API}/global/facts", headers={"Host": "attacker.example"})
        error(r, 421, "HOST_NOT_ALLOWED")
        error(http.get(API, headers={"Host": "127.0.0.3"}), 421, "HOST_NOT_ALLOWED")


def test_the_hooks_own_client_passes_the_guard(served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # coffer-hook POSTs an empty-bodied sweep for Codex: it must send JSON, or the API refuses it.
    from coffer_memory._agents.hook import _api

    monkeypatch.setenv("COFFER_API_URL", served)
    answer = _api("POST", "/api/v1/agents/codex/transcripts/sweep?limit=1&dry_run=true", None, 10)
    assert answer["kind"] == "distill"


# -- Origin ------------------------------------------------------------------------------------
@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://localhost.evil.example:8765"])
def test_a_foreign_origin_is_refused(client: TestClient, origin: str) -> None:
    headers = {"Origin": origin}
    error(client.get(API, headers=headers), 403, "ORIGIN_NOT_ALLOWED")
    r = client.post(f"{API}/global/facts", json={"text": "planted"}, headers=headers)
    error(r, 403, "ORIGIN_NOT_ALLOWED")
    assert fact_count(client) == 0


def test_the_servers_own_origin_is_allowed_and_another_local_port_only_when_listed(
    client: TestClient, service: MemoryService
) -> None:
    # The /docs page served by the API itself, by any loopback name; a page of another server on
    # this machine (a dev server's, on another port) is another origin, unless allowed by name.
    here = {"Host": "127.0.0.1:8765"}
    for origin in ("http://localhost:8765", "http://127.0.0.1:8765", "http://[::1]:8765"):
        assert client.get(API, headers={**here, "Origin": origin}).status_code == 200, origin
    for origin in ("http://127.0.0.1:3000", "https://[::1]:8443", "http://localhost"):
        error(client.get(API, headers={**here, "Origin": origin}), 403, "ORIGIN_NOT_ALLOWED")
    with TestClient(create_app(service, allowed_origins=["http://127.0.0.1:3000"])) as c:
        assert c.get(API, headers={**here, "Origin": "http://127.0.0.1:3000"}).status_code == 200
        error(c.get(API, headers={**here, "Origin": "http://127.0.0.1:3001"}), 403, "ORIGIN_NOT_ALLOWED")


def test_a_preflight_without_cors_configured_grants_nothing(client: TestClient) -> None:
    preflight = {"Access-Control-Request-Method": "DELETE", "Access-Control-Request-Headers": "content-type"}
    foreign = client.options(f"{API}/global/facts", headers={"Origin": "http://evil.example", **preflight})
    error(foreign, 403, "ORIGIN_NOT_ALLOWED")
    own = {"Host": "localhost:8765", "Origin": "http://localhost:8765"}
    local = client.options(f"{API}/global/facts", headers={**own, **preflight})
    assert local.status_code == 405
    for r in (foreign, local):
        assert not any(h.startswith("access-control-") for h in r.headers), r.headers


def test_a_configured_cors_origin_gets_cors_headers(service: MemoryService) -> None:
    app = create_app(service, token="s3cret", cors_origins=["https://app.example/"])
    origin = {"Origin": "https://app.example"}
    with TestClient(app) as c:
        preflight = c.options(
            f"{API}/global/facts",
            headers={
                **origin,
                "Access-Control-Request-Method": "DELETE",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert preflight.status_code == 200, preflight.text
        assert preflight.headers["access-control-allow-origin"] == "https://app.example"
        assert "DELETE" in preflight.headers["access-control-allow-methods"]
        r = c.get(API, headers={**origin, "Authorization": "Bearer s3cret"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        error(c.get(API, headers=origin), 401, "UNAUTHORIZED")  # the token still holds
        error(c.get(API, headers={"Origin": "https://evil.example"}), 403, "ORIGIN_NOT_ALLOWED")


# -- content types: blind cross-site POSTs -----------------------------------------------------
def _blind_posts(repo: Path) -> list[tuple[str, bytes]]:
    calls = [(f"/api/v1/agents/{agent}/hook-install", b"") for agent in AGENTS]
    calls += [(f"/api/v1/agents/{agent}/transcripts/sweep?limit=1000", b"") for agent in AGENTS]
    calls += [
        (f"{API}/global/organize", b""),
        (f"{API}/global/reorg", b""),
        (f"{API}/global/reindex?rebuild=true", b""),
        ("/api/v1/agents/claude-code/sessions/s1/end", json.dumps({"cwd": str(repo)}).encode()),
        (f"{API}/global/facts", b'{"text": "planted by a web page"}'),
    ]
    return calls


@pytest.mark.parametrize("content_type", SIMPLE_CONTENT_TYPES)
def test_blind_cross_site_posts_run_nothing(
    client: TestClient,
    service: MemoryService,
    agent_files: dict[Path, bytes],
    repo: Path,
    content_type: str | None,
) -> None:
    service.remember("an indexed fact", store="global")
    headers = {"Content-Type": content_type} if content_type else {}
    for path, body in _blind_posts(repo):
        details = error(client.post(path, content=body, headers=headers), 415, "UNSUPPORTED_MEDIA_TYPE")
        assert details.get("content_type") == content_type, path
    for path, data in agent_files.items():
        assert path.read_bytes() == data, path
    # No organize, reorg, reindex, distill or sweep was started: each one is an operation.
    assert client.get("/api/v1/operations").json() == {"items": []}
    assert fact_count(client) == 1


def test_other_bodies_must_be_json_too(client: TestClient, service: MemoryService) -> None:
    fact = service.remember("before", store="global").fact
    url = f"{API}/global/facts/{fact.id}"
    error(
        client.patch(url, content=b'{"text": "after"}', headers={"Content-Type": "text/plain"}),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    error(
        client.put(
            f"{API}/global/label",
            content=b"label=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        ),
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    )
    assert service.get_fact(fact.id, store="global").fact.body.strip() == "before"
    # A DELETE without a body needs no content type (curl -X DELETE); PATCH with JSON works.
    assert client.patch(url, json={"text": "after"}).status_code == 200
    assert client.delete(url).status_code == 200


def test_an_empty_json_post_still_works(client: TestClient, homes: AgentHomes) -> None:
    r = client.post(f"{API}/global/reindex", headers=JSON)
    assert r.status_code == 202, r.text
    r = client.post(
        "/api/v1/agents/claude-code/hook-install", headers={"Content-Type": "Application/JSON; charset=utf-8"}
    )
    assert r.status_code == 200 and r.json()["status"]["installed"], r.text


# -- token -------------------------------------------------------------------------------------
def test_the_bearer_scheme_is_case_insensitive(service: MemoryService) -> None:
    with TestClient(create_app(service, token="s3cret")) as c:
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            assert c.get(API, headers={"Authorization": f"{scheme} s3cret"}).status_code == 200, scheme
        for value in ("Basic s3cret", "Bearer", "Bearers3cret", "Bearer s3cre", "Bearer s3cret2"):
            r = c.get(API, headers={"Authorization": value})
            error(r, 401, "UNAUTHORIZED")
            assert r.headers["www-authenticate"] == "Bearer"


# -- 405 ---------------------------------------------------------------------------------------
def test_405_names_every_allowed_method(client: TestClient) -> None:
    r = client.put(f"{API}/global/facts", json={})
    error(r, 405, "METHOD_NOT_ALLOWED")
    assert set(r.headers["allow"].split(", ")) == {"GET", "POST", "DELETE"}
    r = client.post(f"{API}/global/facts/some-id", json={})
    assert set(r.headers["allow"].split(", ")) == {"GET", "PATCH", "DELETE"}


# -- behind a prefix ---------------------------------------------------------------------------
def test_mounted_under_a_prefix(service: MemoryService) -> None:
    outer = FastAPI()
    outer.mount("/coffer", create_app(service, allowed_hosts=["proxy.internal"]))
    with TestClient(outer, base_url="http://proxy.internal") as c:
        r = c.post(f"/coffer{API}/global/facts", json={"text": "through the proxy"})
        assert r.status_code == 201, r.text
        assert c.get(f"/coffer{API}/global/facts").json()["items"][0]["text"] == "through the proxy"
        error(c.get(f"/coffer{API}", headers={"Host": "attacker.example"}), 421, "HOST_NOT_ALLOWED")
        error(
            c.post(f"/coffer{API}/global/reindex", headers={"Content-Type": "text/plain"}),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
        )
        r = c.put(f"/coffer{API}/global/facts", json={})
        assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "POST", "DELETE"}
        assert "/api/v1/memory_stores" in c.get("/coffer/openapi.json").json()["paths"]


# -- OpenAPI -----------------------------------------------------------------------------------
def test_the_guards_answers_are_documented(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    for item in doc["paths"].values():
        for method, op in item.items():
            assert {"403", "421"} <= set(op["responses"]), method
            assert ("415" in op["responses"]) == (method in ("post", "put", "patch", "delete"))


# -- lone surrogates ---------------------------------------------------------------------------
def _raw(client: TestClient, method: str, url: str, body: str) -> httpx.Response:
    return client.request(method, url, content=body.encode("ascii"), headers=JSON)


@pytest.mark.parametrize(
    ("method", "path", "body", "loc"),
    [
        ("POST", "/facts", r'{"text": "a\ud800b"}', ["body", "text"]),
        ("POST", "/facts", r'{"text": "ok", "title": "\udfff"}', ["body", "title"]),
        ("POST", "/facts", r'{"text": "ok", "description": "x\ude00\ud83d"}', ["body", "description"]),
        ("POST", "/facts", r'{"text": "ok", "\ud800": 1}', ["body", "\\ud800"]),
        ("PATCH", "/facts/FACT", r'{"text": "\uDBFF"}', ["body", "text"]),
        ("PUT", "/label", r'{"label": "\ud800"}', ["body", "label"]),
    ],
)
def test_a_lone_surrogate_is_invalid_input_not_a_500(
    client: TestClient, service: MemoryService, method: str, path: str, body: str, loc: list[str]
) -> None:
    fact = service.remember("stays as it is", store="global").fact
    r = _raw(client, method, f"{API}/global{path.replace('FACT', fact.id)}", body)
    details = error(r, 422, "INVALID_INPUT")
    assert details["errors"][0]["loc"] == loc and details["errors"][0]["type"] == "lone_surrogate"
    assert fact_count(client) == 1
    assert service.get_fact(fact.id, store="global").fact.body.strip() == "stays as it is"


def test_agent_routes_refuse_a_lone_surrogate(client: TestClient, homes: AgentHomes, repo: Path) -> None:
    calls = [
        (
            "POST",
            "/api/v1/agents/claude-code/sessions/s1/end",
            {"cwd": str(repo), "transcript_path": "/t/\ud800"},
        ),
        ("POST", "/api/v1/agents/claude-code/hook-install", {"disable_native_memory": True, "\udc00": 1}),
        ("PATCH", "/api/v1/agents/claude-code", {"disable_native_memory": True, "x": ["\ud800"]}),
    ]
    for method, url, body in calls:
        details = error(_raw(client, method, url, json.dumps(body)), 422, "INVALID_INPUT")
        assert details["errors"][0]["type"] == "lone_surrogate", url
    assert details["errors"][0]["loc"] == ["body", "x", 0]
    assert not (homes.claude / "settings.json").exists()
    assert client.get("/api/v1/operations").json() == {"items": []}


def test_surrogate_pairs_and_escaped_backslashes_are_fine(client: TestClient) -> None:
    r = _raw(client, "POST", f"{API}/global/facts", r'{"text": "smile \ud83d\ude00 and a literal \\ud800"}')
    assert r.status_code == 201, r.text
    assert r.json()["fact"]["text"] == "smile \U0001f600 and a literal \\ud800"


def test_surrogates_encoded_as_raw_bytes_are_invalid_input(client: TestClient) -> None:
    r = client.post(f"{API}/global/facts", content=b'{"text": "a\xed\xa0\x80b"}', headers=JSON)
    error(r, 422, "INVALID_INPUT")
    assert fact_count(client) == 0


def test_coffer_api_refuses_a_malformed_allowed_host_at_start(capsys: pytest.CaptureFixture[str]) -> None:
    from coffer_memory_fastapi.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--allowed-host", "coffer.lan", "--allowed-host", "not a host"])
    assert exit_info.value.code == 2
    assert "not a host" in capsys.readouterr().err

"""The REST adapter through FastAPI's TestClient on a real temp home and real git repositories."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import poll
from fastapi.testclient import TestClient
from served import Served

from coffer_memory import MemoryService, ServiceClosed
from coffer_memory_fastapi import create_app

API = "/api/v1/memory_stores"
BAD_NAMES = ["nope", "project-xyz", "project-01ARZ3NDEKTSV4RRFFQ69G5FA", "..", "GLOBAL"]


def project_store(service: MemoryService, repo: Path) -> str:
    return service.resolve_store(cwd=repo)


def error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    details: dict[str, Any] = body["error"]["details"]
    return details


def add(client: TestClient, store: str, text: str, **extra: str) -> dict[str, Any]:
    r = client.post(f"{API}/{store}/facts", json={"text": text, **extra})
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


# -- stores ------------------------------------------------------------------------------------
def test_stores_list_get_metrics(client: TestClient, service: MemoryService, repo: Path) -> None:
    assert client.get(API).json() == {"items": []}
    add(client, "global", "we deploy with fly.io")
    service.remember("the api lives in services/api", cwd=repo)
    name = project_store(service, repo)
    items = client.get(API).json()["items"]
    assert [s["name"] for s in items] == ["global", name]
    project = client.get(f"{API}/{name}").json()
    assert project["store_dir"] == str(service.paths(name).root)
    assert Path(project["store_dir"]).is_dir() and project["exists"] is True
    assert project["scope"] == "project" and project["fact_count"] == 1
    assert project["display_name"] == repo.name and project["project_root"] == str(repo)
    metrics = client.get(f"{API}/global/metrics").json()
    assert (
        metrics["fact_count"] == 1 and metrics["journal_files"] == 0 and metrics["consolidation_log"] is False
    )
    service.journal_append("did a thing", cwd=repo)
    service.save_handoff("halfway through", cwd=repo)
    service.append_rule("always run ruff", store=name)
    metrics = client.get(f"{API}/{name}/metrics").json()
    assert (metrics["journal_files"], metrics["handoff_scenes"], metrics["rules_files"]) == (1, 1, 1)


def test_store_not_yet_on_disk_is_lazy(client: TestClient, service: MemoryService, repo: Path) -> None:
    name = project_store(service, repo)
    r = client.get(f"{API}/{name}")
    assert r.status_code == 200
    assert r.json()["exists"] is False and r.json()["fact_count"] == 0
    assert not service.paths(name).root.exists()


def test_label_set_and_clear(client: TestClient, service: MemoryService, repo: Path) -> None:
    service.remember("x marks the spot", cwd=repo)
    name = project_store(service, repo)
    r = client.put(f"{API}/{name}/label", json={"label": "My Project"})
    assert r.status_code == 200 and r.json()["label"] == "My Project"
    assert r.json()["display_name"] == "My Project"
    r = client.delete(f"{API}/{name}/label")
    assert r.status_code == 200 and r.json()["label"] is None and r.json()["display_name"] == repo.name
    error(client.put(f"{API}/{name}/label", json={"label": ""}), 422, "INVALID_INPUT")
    error(client.put(f"{API}/{name}/label", json={"label": "a\x01b"}), 422, "INVALID_INPUT")


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_invalid_store_names_are_404_and_touch_nothing(tmp_home: Path, bad: str) -> None:
    with MemoryService(tmp_home) as svc, TestClient(create_app(svc), raise_server_exceptions=False) as c:
        calls = [
            c.get(f"{API}/{bad}"),
            c.get(f"{API}/{bad}/metrics"),
            c.put(f"{API}/{bad}/label", json={"label": "x"}),
            c.delete(f"{API}/{bad}/label"),
            c.post(f"{API}/{bad}/facts", json={"text": "hello"}),
            c.get(f"{API}/{bad}/facts"),
            c.delete(f"{API}/{bad}/facts"),
            c.get(f"{API}/{bad}/facts/01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            c.get(f"{API}/{bad}/recall", params={"query": "hello"}),
            c.get(f"{API}/recall", params={"query": "hello", "store": bad}),
            c.get(f"{API}/{bad}/rules"),
            c.get(f"{API}/{bad}/journal"),
            c.get(f"{API}/{bad}/handoff"),
            c.get(f"{API}/{bad}/consolidation-log"),
            c.delete(f"{API}/{bad}/consolidation-log"),
            c.post(f"{API}/{bad}/reindex", json={}),
            c.post(f"{API}/{bad}/organize", json={}),
        ]
        for r in calls:
            if bad == "..":  # normalised away by the client: a route that does not exist
                assert r.status_code in (404, 405), r.text
                continue
            assert error(r, 404, "MEMORY_STORE_NOT_FOUND") == {"store": bad}
    assert not tmp_home.exists() or not (tmp_home / "memory").exists()


# -- facts -------------------------------------------------------------------------------------
def test_fact_add_get_carries_disk_truth(client: TestClient) -> None:
    r = client.post(f"{API}/global/facts", json={"text": "we deploy with fly.io", "title": "Deploys"})
    assert r.status_code == 201
    out = r.json()
    fact = out["fact"]
    path = Path(fact["path"])
    assert path.is_absolute() and path.is_file()
    assert fact["folder_path"] == str(path.parent)
    assert fact["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() == out["after_sha256"]
    assert out["before_sha256"] is None
    assert r.headers["etag"] == f'"{fact["sha256"]}"'
    assert fact["title"] == "Deploys" and fact["text"] == "we deploy with fly.io" and fact["actor"] == "user"
    got = client.get(f"{API}/global/facts/{fact['id']}")
    assert got.status_code == 200 and got.json() == fact
    assert got.headers["etag"] == r.headers["etag"]


def test_fact_get_unknown_is_404(client: TestClient) -> None:
    add(client, "global", "something")
    details = error(client.get(f"{API}/global/facts/01ARZ3NDEKTSV4RRFFQ69G5FAV"), 404, "MEMORY_NOT_FOUND")
    assert details["fact_id"] == "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    error(client.get(f"{API}/global/facts/not-an-id"), 404, "MEMORY_NOT_FOUND")


@pytest.mark.parametrize("text", ["", "   \n  "])
def test_empty_text_is_rejected(client: TestClient, text: str) -> None:
    details = error(client.post(f"{API}/global/facts", json={"text": text}), 422, "MEMORY_REJECTED")
    assert details["reason"] == "empty"


def test_too_long_text_is_rejected(client: TestClient) -> None:
    details = error(client.post(f"{API}/global/facts", json={"text": "x" * 9000}), 422, "MEMORY_REJECTED")
    assert details["reason"] == "too_long"


def test_edit_with_if_match(client: TestClient) -> None:
    fact = add(client, "global", "the db is postgres 15")["fact"]
    url = f"{API}/global/facts/{fact['id']}"
    r = client.patch(url, json={"text": "the db is postgres 16"}, headers={"If-Match": f'"{fact["sha256"]}"'})
    assert r.status_code == 200, r.text
    edited = r.json()
    assert edited["before_sha256"] == fact["sha256"]
    assert edited["fact"]["sha256"] == edited["after_sha256"] != fact["sha256"]
    assert r.headers["etag"] == f'"{edited["after_sha256"]}"'
    assert Path(fact["path"]).read_text().rstrip().endswith("postgres 16")
    assert client.get(url).json()["text"] == "the db is postgres 16"
    on_disk = Path(fact["path"]).read_bytes()
    stale = client.patch(url, json={"text": "lost"}, headers={"If-Match": f'"{fact["sha256"]}"'})
    details = error(stale, 412, "MEMORY_CONFLICT")
    assert details["actual_sha256"] == edited["after_sha256"]
    assert Path(fact["path"]).read_bytes() == on_disk
    error(client.patch(url, json={"text": "x"}, headers={"If-Match": "garbage"}), 422, "INVALID_INPUT")
    error(client.patch(url, json={"text": ""}), 422, "MEMORY_REJECTED")
    assert client.patch(url, json={"title": "DB"}, headers={"If-Match": "*"}).json()["fact"]["title"] == "DB"


def test_delete_and_clear(client: TestClient) -> None:
    one = add(client, "global", "first fact")["fact"]
    add(client, "global", "second fact")
    add(client, "global", "third fact")
    url = f"{API}/global/facts/{one['id']}"
    error(client.delete(url, headers={"If-Match": "0" * 64}), 412, "MEMORY_CONFLICT")
    assert Path(one["path"]).exists()
    r = client.delete(url, headers={"If-Match": one["sha256"]})
    assert r.status_code == 200
    assert r.json()["before_sha256"] == one["sha256"] and r.json()["after_sha256"] is None
    assert not Path(one["path"]).exists()
    error(client.get(url), 404, "MEMORY_NOT_FOUND")
    error(client.delete(url), 404, "MEMORY_NOT_FOUND")
    cleared = client.delete(f"{API}/global/facts").json()
    assert cleared["store"] == "global" and cleared["deleted"] == 2
    assert all(not Path(p).exists() for p in cleared["paths"])
    assert client.get(f"{API}/global/facts").json() == {"items": [], "next_cursor": None}


def test_list_paginates_with_a_cursor(client: TestClient) -> None:
    ids = {add(client, "global", f"fact number {i}")["fact"]["id"] for i in range(5)}
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = client.get(f"{API}/global/facts", params=params).json()
        seen += [f["id"] for f in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 5 and set(seen) == ids


def test_cursor_from_another_store_is_invalid(client: TestClient, service: MemoryService, repo: Path) -> None:
    for i in range(3):
        add(client, "global", f"global fact {i}")
        service.remember(f"project fact {i}", cwd=repo)
    name = project_store(service, repo)
    cursor = client.get(f"{API}/global/facts", params={"limit": 1}).json()["next_cursor"]
    assert cursor
    details = error(client.get(f"{API}/{name}/facts", params={"cursor": cursor}), 422, "INVALID_CURSOR")
    assert details["field"] == "cursor"
    error(client.get(f"{API}/global/facts", params={"cursor": "!!!"}), 422, "INVALID_CURSOR")
    error(client.get(f"{API}/global/facts", params={"limit": 0}), 422, "INVALID_INPUT")


# -- recall ------------------------------------------------------------------------------------
def test_recall_across_the_scopes_of_a_cwd(client: TestClient, service: MemoryService, repo: Path) -> None:
    add(client, "global", "deploys go through the release pipeline")
    service.remember("deploys of this project use blue green switching", cwd=repo)
    name = project_store(service, repo)
    (repo / "sub").mkdir()
    r = client.get(f"{API}/recall", params={"query": "deploys", "cwd": str(repo / "sub")})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["mode"] == "keyword" and out["fallback"] is False
    assert out["stores"] == [name, "global"]
    assert {h["store"] for h in out["hits"]} == {name, "global"}
    assert all(Path(h["path"]).is_file() for h in out["hits"])
    only_global = client.get(f"{API}/recall", params={"query": "deploys", "store": "global", "mode": "grep"})
    assert only_global.json()["mode"] == "grep"
    assert [h["store"] for h in only_global.json()["hits"]] == ["global"]
    one = client.get(f"{API}/{name}/recall", params={"query": "blue green", "limit": 1}).json()
    assert len(one["hits"]) == 1 and one["hits"][0]["store"] == name


def test_recall_errors(client: TestClient, tmp_path: Path) -> None:
    error(client.get(f"{API}/recall", params={"query": "x"}), 422, "INVALID_INPUT")
    error(client.get(f"{API}/recall", params={"query": "x", "cwd": "relative/dir"}), 422, "INVALID_INPUT")
    error(
        client.get(f"{API}/recall", params={"query": "x", "cwd": str(tmp_path / "nowhere")}),
        422,
        "INVALID_INPUT",
    )
    error(
        client.get(f"{API}/recall", params={"query": "x", "store": "global", "mode": "magic"}),
        422,
        "INVALID_INPUT",
    )
    details = error(
        client.get(f"{API}/recall", params={"query": "x", "store": "global", "mode": "vector"}),
        422,
        "INVALID_INPUT",
    )
    assert details["field"] == "mode"
    error(client.get(f"{API}/recall", params={"query": "", "store": "global"}), 422, "INVALID_INPUT")
    outside = client.get(f"{API}/recall", params={"query": "anything", "cwd": str(tmp_path)})
    assert outside.status_code == 200 and outside.json()["stores"] == ["global"]


# -- lanes -------------------------------------------------------------------------------------
def test_lane_reads_on_an_empty_store_are_200(client: TestClient, service: MemoryService, repo: Path) -> None:
    for name in (project_store(service, repo), "global"):
        if name != "global":  # the global store has no journal: 422 (tests/test_lane_faces.py)
            assert client.get(f"{API}/{name}/journal").json() == {"files": []}
        assert client.get(f"{API}/{name}/handoff").json() == {"scenes": []}
        log = client.get(f"{API}/{name}/consolidation-log")
        assert log.status_code == 200 and log.json()["text"] is None
        assert log.json()["path"] == str(service.paths(name).consolidation_log)
        assert log.json()["folder_path"] == str(service.paths(name).root)
        rules = client.get(f"{API}/{name}/rules")
        assert rules.status_code == 200 and rules.json()["text"] == "" and rules.json()["files"] == []
    assert not (service.home / "memory").exists()


def test_lane_reads_and_deletes(client: TestClient, service: MemoryService, repo: Path) -> None:
    name = project_store(service, repo)
    service.journal_append("refactored the parser", cwd=repo)
    service.save_handoff("next: wire the cli", cwd=repo)
    service.append_rule("never push to main", store=name)

    journal = client.get(f"{API}/{name}/journal").json()["files"]
    assert len(journal) == 1 and "refactored the parser" in journal[0]["text"]
    assert Path(journal[0]["path"]).is_file() and journal[0]["folder_path"] == str(
        Path(journal[0]["path"]).parent
    )
    scenes = client.get(f"{API}/{name}/handoff").json()["scenes"]
    assert [s["branch"] for s in scenes] == ["main"] and "wire the cli" in scenes[0]["text"]
    assert scenes[0]["head"] and Path(scenes[0]["path"]).is_file()
    rules = client.get(f"{API}/{name}/rules").json()
    assert "never push to main" in rules["text"] and len(rules["files"]) == 1

    period = journal[0]["period"]
    r = client.delete(f"{API}/{name}/journal/{period}")
    assert r.status_code == 200 and r.json()["after_sha256"] is None and not Path(journal[0]["path"]).exists()
    error(client.delete(f"{API}/{name}/journal/{period}"), 404, "MEMORY_NOT_FOUND")
    error(client.delete(f"{API}/{name}/journal/not-a-date"), 422, "INVALID_INPUT")
    assert client.delete(f"{API}/{name}/handoff/main").status_code == 200
    error(client.delete(f"{API}/{name}/handoff/main"), 404, "MEMORY_NOT_FOUND")
    error(client.delete(f"{API}/{name}/handoff/feature/none"), 404, "MEMORY_NOT_FOUND")
    deleted = client.delete(f"{API}/{name}/rules").json()["deleted"]
    assert len(deleted) == 1 and not Path(deleted[0]["path"]).exists()
    error(client.delete(f"{API}/{name}/rules"), 404, "MEMORY_NOT_FOUND")

    log = client.get(f"{API}/{name}/consolidation-log").json()
    assert log["text"] and "journal/" in log["text"] and "handoff/main" in log["text"]
    assert client.delete(f"{API}/{name}/consolidation-log").status_code == 200
    assert client.get(f"{API}/{name}/consolidation-log").json()["text"] is None
    error(client.delete(f"{API}/{name}/consolidation-log"), 404, "MEMORY_NOT_FOUND")


def test_handoff_branch_with_a_slash(client: TestClient, service: MemoryService, repo: Path) -> None:
    from conftest import git

    git(repo, "checkout", "-q", "-b", "feature/login")
    service.save_handoff("login form half done", cwd=repo)
    name = project_store(service, repo)
    assert [s["branch"] for s in client.get(f"{API}/{name}/handoff").json()["scenes"]] == ["feature/login"]
    assert client.delete(f"{API}/{name}/handoff/feature/login").status_code == 200
    assert client.get(f"{API}/{name}/handoff").json() == {"scenes": []}


# -- agents ------------------------------------------------------------------------------------
def test_session_context(client: TestClient, service: MemoryService, repo: Path, tmp_path: Path) -> None:
    service.append_rule("use uv, never pip", store=project_store(service, repo))
    service.append_rule("answer in English", store="global")
    r = client.get("/api/v1/agents/claude-code/session-context", params={"cwd": str(repo)})
    assert r.status_code == 200
    context = r.json()["additional_context"]
    assert "use uv, never pip" in context and "answer in English" in context and len(context) <= 10_000
    outside = client.get("/api/v1/agents/codex/session-context", params={"cwd": str(tmp_path)}).json()
    assert (
        "use uv" not in outside["additional_context"] and "answer in English" in outside["additional_context"]
    )
    error(client.get("/api/v1/agents/codex/session-context"), 422, "INVALID_INPUT")
    error(client.get("/api/v1/agents/codex/session-context", params={"cwd": "rel"}), 422, "INVALID_INPUT")


# -- long-running operations -------------------------------------------------------------------
def test_operations_start_and_poll(client: TestClient, service: MemoryService) -> None:
    add(client, "global", "a fact to index")
    r = client.post(f"{API}/global/reindex", params={"rebuild": True}, json={})
    assert r.status_code == 202 and r.json()["status"] in ("queued", "running", "succeeded")
    op = poll(client, r.headers["location"])
    assert op["status"] == "succeeded" and op["kind"] == "reindex" and op["error"] is None
    assert op["reindex"][0]["store"] == "global" and op["reindex"][0]["scanned"] == 1
    for kind in ("organize", "reorg"):
        r = client.post(f"{API}/global/{kind}", params={"dry_run": True}, json={})
        op = poll(client, r.headers["location"])
        assert op["status"] == "succeeded" and op["result"]["status"] == "no_model", op
    listed = client.get("/api/v1/operations").json()["items"]
    assert [o["kind"] for o in listed] == ["reorg", "organize", "reindex"]
    error(client.get("/api/v1/operations/nope"), 404, "OPERATION_NOT_FOUND")


# -- auth, envelope, OpenAPI, lifespan ---------------------------------------------------------
def test_bearer_token_is_required_everywhere(service: MemoryService) -> None:
    with TestClient(create_app(service, token="s3cret"), raise_server_exceptions=False) as c:
        for path in (API, f"{API}/global/facts", "/openapi.json", "/nowhere"):
            r = c.get(path)
            error(r, 401, "UNAUTHORIZED")
            assert r.headers["www-authenticate"] == "Bearer"
        error(c.get(API, headers={"Authorization": "Bearer wrong"}), 401, "UNAUTHORIZED")
        ok = c.get(API, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
        doc = c.get("/openapi.json", headers={"Authorization": "Bearer s3cret"}).json()
        assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_validation_errors_use_the_envelope(client: TestClient) -> None:
    details = error(client.post(f"{API}/global/facts", json={"title": "no text"}), 422, "INVALID_INPUT")
    assert details["errors"][0]["loc"] == ["body", "text"]
    error(
        client.post(
            f"{API}/global/facts", content=b"{not json", headers={"Content-Type": "application/json"}
        ),
        422,
        "INVALID_INPUT",
    )
    error(client.get("/api/v1/nowhere"), 404, "NOT_FOUND")
    error(client.put(API), 405, "METHOD_NOT_ALLOWED")


def test_unexpected_failures_use_the_envelope(service: MemoryService) -> None:
    app = create_app(service)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret detail that must not leak")

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
    assert error(r, 500, "INTERNAL") == {"type": "RuntimeError"}
    assert "secret" not in r.text


def test_openapi_is_complete(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert "ErrorOut" in doc["components"]["schemas"]
    operations = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    assert len(operations) >= 25
    for path, method, op in operations:
        success = [s for s in op["responses"] if s.startswith("2")]
        assert success, (path, method)
        content = op["responses"][success[0]]["content"]
        if path == "/api/v1/export":  # a file download, not JSON
            assert set(content) == {"application/zip", "application/x-ndjson"}
        else:
            assert "$ref" in content["application/json"]["schema"], (path, method)
        for status in ("422", "500"):
            ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorOut"), (path, method, status)
        if path.startswith(API + "/{name}") or path.endswith("{op_id}"):
            assert "404" in op["responses"], (path, method)
    assert "412" in doc["paths"][f"{API}/{{name}}/facts/{{fact_id}}"]["patch"]["responses"]


def test_the_app_closes_only_a_service_it_opened(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COFFER_HOME", str(tmp_home))
    app = create_app()
    with TestClient(app) as c:
        add(c, "global", "written through an owned service")
    owned: MemoryService = app.state.service
    assert owned.home == tmp_home and not owned.index.is_open
    with MemoryService(tmp_home) as mine:
        with TestClient(create_app(mine)) as c:
            assert c.get(f"{API}/global").json()["fact_count"] == 1
        assert mine.get_fact(mine.list_facts(store="global").items[0].fact.id, store="global")
    with pytest.raises(ServiceClosed):  # the owned service was closed with its app
        owned.list_facts(store="global")


# -- the console script ------------------------------------------------------------------------
@pytest.mark.parametrize("access_log", [False, True])
def test_coffer_api_serves_over_real_http(tmp_home: Path, repo: Path, access_log: bool) -> None:
    exe = Path(sys.executable).parent / "coffer-api"
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_API_TOKEN": "tok"}
    args = [str(exe), "--log-level", "info", *(["--access-log"] if access_log else [])]
    with Served(args, env) as served:
        base = served.base
        with httpx.Client(base_url=base, headers={"Authorization": "Bearer tok"}, timeout=60) as http:
            assert httpx.get(base + API, timeout=60).status_code == 401
            r = http.post(f"{API}/global/facts", json={"text": "served over a real socket"})
            assert r.status_code == 201 and Path(r.json()["fact"]["path"]).is_file()
            hits = http.get(f"{API}/recall", params={"query": "real socket", "cwd": str(repo)}).json()["hits"]
            assert [h["text"] for h in hits] == ["served over a real socket"]
    out, err = served.stdout(), served.stderr()
    # Access lines (uvicorn writes them to stdout) only when asked for; start-up lines either way.
    assert ("POST /api/v1/memory_stores/global/facts" in out + err) is access_log
    assert "Uvicorn running" in err


def test_the_server_parses_http_with_httptools() -> None:
    # The [fastapi] extra installs httptools, so uvicorn's "auto" picks it over pure-Python h11.
    from uvicorn.config import Config

    async def app(scope: Any, receive: Any, send: Any) -> None: ...

    config = Config(app=app, http="auto")
    config.load()
    assert config.http_protocol_class.__name__ == "HttpToolsProtocol"


def test_a_misspelt_body_field_is_refused_and_nothing_is_written(
    client: TestClient, service: MemoryService
) -> None:
    # "tag" for "tags": dropping it would store the fact without the tags the caller meant.
    sent = {"text": "Deploys on Tuesdays.", "tag": ["ops"]}
    error(client.post(f"{API}/global/facts", json=sent), 422, "INVALID_INPUT")
    assert not service.list_facts(store="global").items
    made = add(client, "global", "Deploys on Tuesdays.", title="deploys")
    fact = made["fact"]["id"]
    error(client.patch(f"{API}/global/facts/{fact}", json={"titel": "x"}), 422, "INVALID_INPUT")
    error(client.put(f"{API}/global/label", json={"label": "ops", "colour": "red"}), 422, "INVALID_INPUT")
    assert service.get_fact(fact, store="global").fact.title == "deploys"

"""Export download and import upload over REST (FastAPI's TestClient on real temp homes)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app
from tests.test_porting import all_facts


def _upload(client: Any, data: bytes, **extra: Any) -> Any:
    return client.post("/api/v1/import", json={"content_base64": base64.b64encode(data).decode(), **extra})


def test_download_then_upload_round_trips(
    client: TestClient, svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    svc.remember("We deploy on Fridays", title="Deploy", store="global")
    svc.remember("The API is in api/", cwd=repo)
    response = client.get("/api/v1/export")
    assert response.status_code == 200 and response.headers["content-type"] == "application/zip"
    assert "attachment" in response.headers["content-disposition"]
    assert hashlib.sha256(response.content).hexdigest() == response.headers["x-coffer-sha256"]
    with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
        assert "manifest.json" in zf.namelist()
    with MemoryService(tmp_path / "fresh") as fresh, TestClient(create_app(fresh)) as other:
        dry = _upload(other, response.content, dry_run=True).json()
        assert dry["dry_run"] and dry["written"] == 3 and not fresh.stores()
        done = _upload(other, response.content).json()
        assert done["counts"] == {"created": 3}
        assert all_facts(fresh) == all_facts(svc)
        assert _upload(other, response.content).json()["written"] == 0


def test_jsonl_download_of_one_store(client: TestClient, svc: MemoryService) -> None:
    svc.remember("only global", store="global")
    response = client.get("/api/v1/export", params={"store": "global", "format": "jsonl"})
    assert response.headers["content-type"] == "application/x-ndjson"
    records = [json.loads(line) for line in response.text.splitlines()]
    assert records[0]["record"] == "manifest" and [s["name"] for s in records[0]["stores"]] == ["global"]


def test_a_bad_store_is_404_and_a_bad_upload_is_422(client: TestClient) -> None:
    assert client.get("/api/v1/export", params={"store": "nope"}).status_code == 404
    bad = client.post("/api/v1/import", json={"content_base64": "!!!"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "INVALID_INPUT"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../../escape.md", "x")
        zf.writestr(
            "manifest.json", json.dumps({"format": "coffer-export", "format_version": 1, "files": []})
        )
    slip = _upload(client, buf.getvalue())
    assert slip.status_code == 422
    assert slip.json()["error"]["details"]["reason"] == "unsafe_path"


def test_the_routes_are_documented(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "get" in paths["/api/v1/export"] and "post" in paths["/api/v1/import"]
    assert set(paths["/api/v1/export"]["get"]["responses"]["200"]["content"]) == {
        "application/zip",
        "application/x-ndjson",
    }


def test_an_export_its_import_would_refuse_is_422_naming_the_file(
    client: TestClient, svc: MemoryService
) -> None:
    # It was downloaded, and refused on the way back in.
    svc.remember("a fact", store="global")
    (svc.paths("global").inbox / "binary.md").write_bytes(b"half\x00binary\n")
    response = client.get("/api/v1/export")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "INVALID_INPUT" and error["details"]["reason"] == "not_text"
    assert error["details"]["member"] == "stores/global/knowledge/inbox/binary.md"

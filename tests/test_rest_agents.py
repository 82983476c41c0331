"""The agent integration routes through FastAPI's TestClient, on real temp agent config files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from agent_configs import (
    claude_settings,
    isolated_agent_homes,
    opencode_json,
    opencode_plugin,
    read_json,
    write,
    write_claude,
    write_opencode,
)
from fastapi.testclient import TestClient

from coffer_memory import MemoryService
from coffer_memory._agents.homes import AgentHomes

API = "/api/v1/agents"


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AgentHomes:
    return isolated_agent_homes(tmp_path, monkeypatch)


def ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code
    details: dict[str, Any] = body["error"]["details"]
    return details


def test_list_install_status_patch_uninstall(client: TestClient, homes: AgentHomes) -> None:
    before = write_claude(homes)
    items = ok(client.get(API))["items"]
    assert [a["name"] for a in items] == ["claude-code", "codex", "opencode"]
    assert not any(a["installed"] for a in items)
    assert items[2]["hooks_supported"] is True and items[2]["hooks_installed"] is False  # its plugin

    change = ok(client.post(f"{API}/claude-code/hook-install", json={}))
    assert change["agent"] == "claude-code" and change["action"] == "install"
    assert sorted(change["changed"]) == sorted(str(p) for p in before)
    status = change["status"]
    assert (
        status["installed"]
        and status["hooks_installed"]
        and status["mcp_registered"]
        and status["up_to_date"]
    )
    assert status["files"] == [str(claude_settings(homes)), str(homes.claude_json)]
    assert ok(client.post(f"{API}/claude-code/hook-install", json={}))["changed"] == []  # idempotent
    assert ok(client.get(f"{API}/claude-code/hook-install")) == status
    assert ok(client.get(f"{API}/claude-code")) == status

    change = ok(client.patch(f"{API}/claude-code", json={"disable_native_memory": True}))
    assert change["action"] == "native_memory" and change["changed"] == [str(claude_settings(homes))]
    assert change["status"]["disable_native_memory"] is True
    assert read_json(claude_settings(homes))["autoMemoryEnabled"] is False
    ok(client.patch(f"{API}/claude-code", json={"disable_native_memory": False}))
    assert "autoMemoryEnabled" not in read_json(claude_settings(homes))

    change = ok(client.delete(f"{API}/claude-code/hook-install"))
    assert change["action"] == "uninstall" and change["status"]["installed"] is False
    for path, data in before.items():
        assert path.read_bytes() == data


def test_install_can_switch_native_memory_off(client: TestClient, homes: AgentHomes) -> None:
    write_claude(homes)
    change = ok(client.post(f"{API}/claude-code/hook-install", json={"disable_native_memory": True}))
    assert change["status"]["disable_native_memory"] is True
    assert read_json(claude_settings(homes))["autoMemoryEnabled"] is False
    ok(client.delete(f"{API}/claude-code/hook-install"))
    assert "autoMemoryEnabled" not in read_json(claude_settings(homes))


def test_opencode_gets_mcp_and_the_rules_plugin(client: TestClient, homes: AgentHomes) -> None:
    before = write_opencode(homes)
    change = ok(client.post(f"{API}/opencode/hook-install", json={}))
    assert change["changed"] == [str(opencode_json(homes)), str(opencode_plugin(homes))]
    assert change["status"]["installed"] and change["status"]["hooks_installed"]
    details = error(
        client.patch(f"{API}/opencode", json={"disable_native_memory": True}), 422, "INVALID_INPUT"
    )
    assert details["field"] == "disable_native_memory"
    ok(client.delete(f"{API}/opencode/hook-install"))
    assert opencode_json(homes).read_bytes() == before[opencode_json(homes)]
    assert not opencode_plugin(homes).exists()


def test_status_shows_codex_review_and_the_mcp_check(client: TestClient, homes: AgentHomes) -> None:
    ok(client.post(f"{API}/codex/hook-install", json={}))
    status = ok(client.get(f"{API}/codex"))
    assert status["installed"] and status["mcp_check"] is None  # not started unless asked
    assert [r["state"] for r in status["hook_review"]] == ["untrusted"]
    assert "/hooks" in status["hook_review"][0]["message"]
    assert not status["working"]  # Codex skips the hook until the user trusts it
    checked = ok(client.get(f"{API}/codex", params={"check_mcp": "true"}))
    check = checked["mcp_check"]
    assert check["command"] and check["summary"]
    assert check["ok"] == ("coffer__recall" in check["tools"])
    listed = ok(client.get(f"{API}", params={"check_mcp": "true"}))["items"]
    assert next(a for a in listed if a["name"] == "codex")["mcp_check"] is not None


def test_errors_use_the_envelope(client: TestClient, homes: AgentHomes) -> None:
    details = error(client.get(f"{API}/cursor/hook-install"), 422, "INVALID_INPUT")
    assert details["known"] == ["claude-code", "codex", "opencode"]
    error(client.post(f"{API}/cursor/hook-install", json={}), 422, "INVALID_INPUT")
    error(client.patch(f"{API}/codex", json={"disable_native_memory": "maybe"}), 422, "INVALID_INPUT")
    error(client.patch(f"{API}/codex", json={}), 422, "INVALID_INPUT")
    error(client.post(f"{API}/codex/hook-install", json={"overwrite": True}), 422, "INVALID_INPUT")

    write(claude_settings(homes), b'{"hooks": {')
    details = error(client.post(f"{API}/claude-code/hook-install", json={}), 409, "AGENT_CONFIG_INVALID")
    assert details["path"] == str(claude_settings(homes)) and "not valid JSON" in details["reason"]
    assert claude_settings(homes).read_bytes() == b'{"hooks": {'
    status = ok(client.get(f"{API}/claude-code/hook-install"))
    assert status["installed"] is False and any("not valid JSON" in n for n in status["notes"])


def test_writes_are_audited_with_agent_and_files(
    client: TestClient, service: MemoryService, homes: AgentHomes
) -> None:
    write_opencode(homes)
    ok(client.post(f"{API}/opencode/hook-install", json={}))
    ok(client.delete(f"{API}/opencode/hook-install"))
    rows = [e for e in service.audit_events(limit=10) if e["event"].startswith("agent_")]
    files = [str(opencode_json(homes)), str(opencode_plugin(homes))]
    assert [(r["event"], r["details"]) for r in rows] == [
        ("agent_hook_uninstalled", {"agent": "opencode", "files": files}),
        ("agent_hook_installed", {"agent": "opencode", "files": files}),
    ]


def test_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = ok(client.get("/openapi.json"))["paths"]
    assert set(paths[API]) == {"get"}
    assert set(paths[f"{API}/{{name}}"]) == {"get", "patch"}
    assert set(paths[f"{API}/{{name}}/hook-install"]) == {"get", "post", "delete"}
    assert "409" in paths[f"{API}/{{name}}/hook-install"]["post"]["responses"]


def test_a_coffer_entry_of_the_users_own_needs_force_and_comes_back(
    client: TestClient, homes: AgentHomes
) -> None:
    theirs = b'{\n  "mcp": {\n    "coffer": {"type": "local", "command": ["uvx", "mine"]}\n  }\n}\n'
    write(opencode_json(homes), theirs)
    details = error(client.post(f"{API}/opencode/hook-install", json={}), 409, "AGENT_CONFIG_INVALID")
    assert details["path"] == str(opencode_json(homes)) and "uvx mine" in details["reason"]
    assert opencode_json(homes).read_bytes() == theirs and not opencode_plugin(homes).exists()
    change = ok(client.post(f"{API}/opencode/hook-install", json={"force": True}))
    assert change["status"]["mcp_registered"] and any("uvx mine" in n for n in change["notes"])
    change = ok(client.delete(f"{API}/opencode/hook-install"))
    assert opencode_json(homes).read_bytes() == theirs
    assert change["removed_folders"] == [str(opencode_plugin(homes).parent)] and change["kept_backups"] == []

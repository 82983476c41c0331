"""The session a fact comes from, given through every face: Python, CLI (``--session-id``), REST
(``origin_session_id``) and MCP (``session_id``); a bad id is INVALID_INPUT and writes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import CliRunner
from test_session_neighbours import CHAT, OTHER, QUESTION

from coffer_memory import InvalidInput, MemoryService

BAD_IDS = ["", " chat-1", "chat 1", "chat-1\n", "-chat", "chat\udcff", "x" * 201, "会话-1", "a\x00b"]


def fact_files(home: Path) -> list[Path]:
    return sorted((home / "memory" / "global" / "knowledge").rglob("*.md"))


def found_through_its_question(svc: MemoryService) -> bool:
    """Whether the reply that shares no word with QUESTION is recalled (only its session lends it)."""
    return any(h.text == CHAT[2] for h in svc.recall(QUESTION, stores=["global"], mode="keyword").hits)


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_bad_session_id_is_invalid_input_and_writes_nothing(
    svc: MemoryService, tmp_home: Path, bad: str
) -> None:
    svc.remember("Deploys run make release.", store="global", origin_session_id="chat-1")
    with pytest.raises(InvalidInput) as caught:
        svc.remember("Deploys run make release soon.", store="global", origin_session_id=bad)
    assert caught.value.field == "origin_session_id"
    assert len(fact_files(tmp_home)) == 1


def test_the_cli_remembers_a_session(cli: CliRunner, tmp_home: Path) -> None:
    for text in CHAT:
        assert cli("remember", text, "--store", "global", "--session-id", "chat-7").returncode == 0
    for text in OTHER:
        assert cli("remember", text, "--store", "global").returncode == 0
    assert sum("origin_session_id: chat-7" in p.read_text() for p in fact_files(tmp_home)) == len(CHAT)
    with MemoryService(home=tmp_home) as svc:
        assert found_through_its_question(svc)

    bad = cli("remember", "One more.", "--store", "global", "--session-id", "chat 7")
    assert bad.returncode != 0 and "origin_session_id" in bad.stderr and "Traceback" not in bad.stderr
    assert len(fact_files(tmp_home)) == len(CHAT) + len(OTHER)


def test_rest_remembers_a_session(client: Any, service: MemoryService) -> None:
    for text in CHAT:
        r = client.post(
            "/api/v1/memory_stores/global/facts", json={"text": text, "origin_session_id": "chat-8"}
        )
        assert r.status_code == 201, r.text
    for text in OTHER:
        assert client.post("/api/v1/memory_stores/global/facts", json={"text": text}).status_code == 201
    assert found_through_its_question(service)
    for bad in ("chat 8", "x" * 201, 7):
        r = client.post(
            "/api/v1/memory_stores/global/facts", json={"text": "One more.", "origin_session_id": bad}
        )
        assert r.status_code == 422 and r.json()["error"]["code"] == "INVALID_INPUT", r.text


def test_mcp_remembers_a_session(svc: MemoryService, repo: Path) -> None:
    from mcp import Client

    from coffer_memory_mcp import build_server

    async def run() -> list[bool]:
        async with Client(build_server(svc)) as client:
            for text in CHAT:
                made = await client.call_tool(
                    "coffer__remember",
                    {"text": text, "scope": "global", "cwd": str(repo), "session_id": "chat-9"},
                )
                assert not made.is_error
            for text in OTHER:
                await client.call_tool(
                    "coffer__remember", {"text": text, "scope": "global", "cwd": str(repo)}
                )
            bad = await client.call_tool(
                "coffer__remember",
                {"text": "One more.", "scope": "global", "cwd": str(repo), "session_id": "chat 9"},
            )
            return [bad.is_error, "INVALID_INPUT" in str(bad.content)]

    assert asyncio.run(run()) == [True, True]
    assert found_through_its_question(svc)

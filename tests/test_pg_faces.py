"""PostgreSQL out of reach, as each face shows it: REST's 503 envelope and the MCP tool error, with
the code INDEX_UNAVAILABLE, no traceback, and nothing written (the CLI: ``test_pg.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from served import closed_port

from coffer_memory import MemoryService
from coffer_memory._config import Settings

pytest.importorskip(
    "psycopg", reason="PostgreSQL tests need psycopg: pip install 'coffer-memory[postgresql]'"
)
pytest.importorskip("fastapi")
pytest.importorskip("mcp")


@pytest.fixture
def unreachable(tmp_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryService]:
    """A service whose PostgreSQL listens nowhere (a port held bound, never listening)."""
    port = closed_port()
    monkeypatch.setenv("COFFER_PG_URL", f"postgresql://team:hunter2@127.0.0.1:{port}/coffer")
    with MemoryService(settings=Settings.load(tmp_home, index={"backend": "postgresql"})) as svc:
        yield svc


def test_rest_answers_503_with_the_envelope_and_writes_nothing(
    unreachable: MemoryService, tmp_home: Path
) -> None:
    from fastapi.testclient import TestClient

    from coffer_memory_fastapi import create_app

    with TestClient(create_app(unreachable), raise_server_exceptions=False) as client:
        recall = client.get("/api/v1/memory_stores/global/recall", params={"query": "anything"})
        remember = client.post("/api/v1/memory_stores/global/facts", json={"text": "must not be written"})
    for response in (recall, remember):
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "INDEX_UNAVAILABLE" and "refused" in error["message"]
        assert "hunter2" not in response.text and "Traceback" not in response.text
    assert list((tmp_home / "memory").rglob("*.md")) == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_mcp_tools_answer_a_tool_error_with_the_code(
    unreachable: MemoryService, tmp_home: Path, anyio_backend: Any
) -> None:
    from mcp import Client
    from mcp_types import TextContent

    from coffer_memory_mcp import build_server

    async with Client(build_server(unreachable)) as client:
        result = await client.call_tool(
            "coffer__remember", {"text": "must not be written", "scope": "global"}
        )
    said = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    assert result.is_error and said.startswith("INDEX_UNAVAILABLE: ") and "Traceback" not in said
    assert list((tmp_home / "memory").rglob("*.md")) == []

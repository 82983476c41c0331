"""Session 29, findings left open in the MCP (and REST) faces (faces29): an empty ``since``/``until``
is refused on every face, a JSON-RPC line naming one key twice is refused over stdio as it is over
HTTP, and the ``since``/``until`` descriptions of ``coffer__recall`` say what they take. A real
``coffer-mcp`` over stdio (raw lines written to its stdin), the SDK's client, a real ``coffer-api``
app on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import serve_in_thread
from mcp import Client
from mcp_types import TextContent
from test_mcp_handshake import INITIALIZED, initialize, peers, recorded, remember, request  # noqa: F401

from coffer_memory import MemoryService
from coffer_memory_mcp import build_server


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


# -- 1. an empty since/until over MCP and REST -------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("field", ["since", "until"])
async def test_mcp_recall_refuses_an_empty_time_bound(
    svc: MemoryService, repo: Path, anyio_backend: str, field: str
) -> None:
    """``coffer__recall(since="")`` answered every fact, as if no bound was given."""
    svc.remember("Deploy with make deploy", cwd=repo)
    async with Client(build_server(svc)) as client:
        for value in ("", "   "):
            result = await client.call_tool(
                "coffer__recall", {"query": "deploy", "cwd": str(repo), field: value}
            )
            assert result.is_error, (field, value, _text(result))
            assert _text(result).startswith(f"INVALID_INPUT: {field} is empty: give an ISO 8601 date"), _text(
                result
            )


@pytest.mark.parametrize("field", ["since", "until"])
def test_rest_refuses_an_empty_time_bound(svc: MemoryService, repo: Path, field: str) -> None:
    """``GET /memory_stores/recall?query=deploy&since=`` (a form's empty field) filtered nothing."""
    from coffer_memory_fastapi import create_app

    svc.remember("Deploy with make deploy", cwd=repo)
    with serve_in_thread(create_app(svc)) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        recall = {"query": "deploy"}
        for path, params in (
            ("/api/v1/memory_stores/recall", {**recall, "store": "global"}),
            ("/api/v1/memory_stores/global/recall", recall),
            ("/api/v1/memory_stores/global/facts", {}),
            ("/api/v1/audit", {}),
        ):
            answer = http.get(path, params={**params, field: ""})
            assert answer.status_code == 422, (path, answer.text)
            error = answer.json()["error"]
            assert error["code"] == "INVALID_INPUT" and error["message"].startswith(f"{field} is empty"), (
                error
            )
            assert http.get(path, params={**params, field: "7d"}).status_code == 200, path

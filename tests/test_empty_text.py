"""Empty or blank required text gets the library's own typed error on every face.

``GET /recall?query=`` was answered with pydantic's wording (``query.query: String should have at
least 1 character``) where ``MemoryService.recall`` says ``INVALID_INPUT: query is empty``
(field ``query``); ``PUT .../label`` with ``""`` likewise; an empty ``POST /import`` named the
server's own temp file. Each request goes to a real ``coffer-api`` on 127.0.0.1 and is compared
with what the service raises for the same call; the MCP tools are checked against it too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from served import Served

from coffer_memory import CofferError, MemoryService
from coffer_memory.vocabulary import MAX_QUERY_CHARS
from coffer_memory_fastapi.errors import STATUS
from coffer_memory_mcp import build_server

API = "/api/v1/memory_stores"
BLANKS = ["", " ", "\t\n"]


@pytest.fixture
def api(tmp_home: Path) -> Iterator[httpx.Client]:
    """A client of a real ``coffer-api`` serving ``tmp_home``."""
    exe = Path(sys.executable).parent / "coffer-api"
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    with (
        Served([str(exe), "--log-level", "warning"], env) as server,
        httpx.Client(base_url=server.base) as client,
    ):
        yield client


def raised(call: Callable[[], Any]) -> CofferError:
    with pytest.raises(CofferError) as caught:
        call()
    return caught.value


def answered_as(response: httpx.Response, error: CofferError) -> None:
    """``response`` is the envelope of ``error``, with its status."""
    assert (response.status_code, response.json()) == (STATUS[error.code], {"error": error.to_dict()})


@pytest.mark.parametrize("blank", BLANKS)
def test_an_empty_query_is_the_services_error_on_both_recall_routes(
    api: httpx.Client, tmp_home: Path, blank: str
) -> None:
    with MemoryService(tmp_home) as svc:
        error = raised(lambda: svc.recall(blank, stores=["global"]))
    assert (error.code, error.message) == ("INVALID_INPUT", "query is empty")
    answered_as(api.get(f"{API}/recall", params={"query": blank, "store": "global"}), error)
    answered_as(api.get(f"{API}/global/recall", params={"query": blank}), error)


@pytest.mark.parametrize("blank", BLANKS)
def test_empty_text_in_a_body_is_the_services_error(api: httpx.Client, tmp_home: Path, blank: str) -> None:
    with MemoryService(tmp_home) as svc:
        fact = svc.remember("Deploys go through make release.", store="global").fact
        errors = {
            "remember": raised(lambda: svc.remember(blank, store="global")),
            "edit": raised(lambda: svc.edit_fact(fact.id, store="global", body=blank)),
            "label": raised(lambda: svc.set_label("global", blank)),
        }
    answered_as(api.post(f"{API}/global/facts", json={"text": blank}), errors["remember"])
    answered_as(api.patch(f"{API}/global/facts/{fact.id}", json={"text": blank}), errors["edit"])
    answered_as(api.put(f"{API}/global/label", json={"label": blank}), errors["label"])


def test_an_empty_upload_is_the_services_error_without_the_servers_temp_file(
    api: httpx.Client, tmp_home: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.export"
    empty.write_bytes(b"")
    with MemoryService(tmp_home) as svc:
        error = raised(lambda: svc.import_memory(empty, kind="coffer"))
    response = api.post("/api/v1/import", json={"content_base64": ""})
    body = response.json()["error"]
    assert (response.status_code, body["code"]) == (STATUS[error.code], error.code)
    assert body["details"]["reason"] == error.details["reason"] == "unknown_format"
    assert body["message"] == "content_base64: empty file", body  # not /tmp/coffer-upload-….export
    assert body["details"]["source"] == "content_base64"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_mcp_tools_give_the_services_error_for_empty_text(tmp_home: Path) -> None:
    with MemoryService(tmp_home) as svc:
        calls = {
            "coffer__recall": ({"query": ""}, lambda: svc.recall("", stores=["global"])),
            "coffer__remember": ({"text": " ", "scope": "global"}, lambda: svc.remember(" ", store="global")),
            "coffer__handoff": (
                {"text": "", "cwd": str(tmp_home)},
                lambda: svc.save_handoff("", cwd=tmp_home),
            ),
        }
        async with Client(build_server(svc)) as client:
            for tool, (arguments, direct) in calls.items():
                error = raised(direct)
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, result)
                assert result.structured_content == {"error": error.to_dict()}, tool


def test_an_over_long_query_is_the_services_error_on_both_recall_routes(
    api: httpx.Client, tmp_home: Path
) -> None:
    # The schema's maxLength is the core's limit; one character past it is the core's own error.
    long = "x" * (MAX_QUERY_CHARS + 1)
    with MemoryService(tmp_home) as svc:
        error = raised(lambda: svc.recall(long, stores=["global"]))
    assert (error.code, error.message) == (
        "INVALID_INPUT",
        f"query is longer than {MAX_QUERY_CHARS} characters",
    )
    answered_as(api.get(f"{API}/recall", params={"query": long, "store": "global"}), error)
    answered_as(api.get(f"{API}/global/recall", params={"query": long}), error)
    schema = api.get("/openapi.json").json()["paths"][f"{API}/recall"]["get"]["parameters"]
    query = next(p for p in schema if p["name"] == "query")["schema"]
    assert (query["minLength"], query["maxLength"]) == (1, MAX_QUERY_CHARS)

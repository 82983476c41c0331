"""An argument a call does not take is ``INVALID_INPUT`` on every face (fixes16): the library's
``list_transcripts(**filters)`` raised a bare ``TypeError`` from the lister, and REST ignored an
unknown query parameter (``?serch=x`` listed every session; ``?tags=a`` on recall searched every
fact). The MCP tools refuse one already (tests/test_mcp.py::test_an_argument_the_tool_does_not_take_is_refused)."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from coffer_memory import AsyncMemoryService, InvalidInput, MemoryService
from coffer_memory._transcripts.listing import SessionLister


def test_list_transcripts_refuses_an_unknown_keyword(svc: MemoryService) -> None:
    with pytest.raises(InvalidInput) as caught:
        svc.list_transcripts("claude-code", serch="deploy", bogus=1)
    assert caught.value.code == "INVALID_INPUT" and caught.value.details["field"] == "bogus"
    assert "'bogus', 'serch'" in caught.value.message and "search" in caught.value.message
    assert svc.list_transcripts("claude-code", search="deploy").total == 0  # the known ones work


def test_the_async_list_transcripts_refuses_an_unknown_keyword(svc: MemoryService) -> None:
    async def call() -> None:
        await AsyncMemoryService(svc).list_transcripts("claude-code", **{"\x1b[2Jtag": "x"})

    with pytest.raises(InvalidInput) as caught:
        asyncio.run(call())
    assert "\x1b" not in caught.value.message and "argument 'tag'" in caught.value.message


def test_the_listed_filters_are_the_listers() -> None:
    from coffer_memory._transcripts.reading import LIST_FILTERS

    params = inspect.signature(SessionLister.list_sessions).parameters.values()
    assert tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY) == LIST_FILTERS


def test_rest_refuses_an_unknown_query_parameter(client: Any) -> None:
    assert (
        client.post("/api/v1/memory_stores/global/facts", json={"text": "deploy with make"}).status_code < 300
    )
    cases = (
        "/api/v1/agents/claude-code/transcripts?serch=deploy",
        "/api/v1/memory_stores/recall?query=deploy&tags=ops",  # the recall shortcut's path
        "/api/v1/memory_stores/global/recall?query=deploy&cwd=/tmp",
        "/api/v1/memory_stores/global/facts?limit=5&curser=x",
    )
    for url in cases:
        r = client.get(url)
        assert r.status_code == 422, (url, r.text)
        error = r.json()["error"]
        assert error["code"] == "INVALID_INPUT" and "takes no query parameter" in error["message"], error
    assert client.get("/api/v1/memory_stores/recall?query=deploy&tag=ops&store=global").status_code == 200
    assert client.get("/api/v1/memory_stores/global/facts?limit=5").status_code == 200
    assert client.get("/api/v1/agents/claude-code/transcripts?search=deploy").status_code == 200

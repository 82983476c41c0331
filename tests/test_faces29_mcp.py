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


# -- 3. a key named twice over stdio -------------------------------------------------------------------

TWICE = (
    # The tool's argument: a log or a proxy that keeps the first value saw another fact.
    '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "coffer__remember", '
    '"arguments": {"text": "kept a", "text": "kept b", "scope": "global"}}}',
    # The envelope's own keys: the fast path answered this as the ping its last value names.
    '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "method": "ping"}',
    # An escaped spelling is the same key.
    '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "coffer__remember", '
    '"arguments": {"text": "kept c", "\\u0074ext": "kept d", "scope": "global"}}}',
)
# A notification naming a key twice has no one to answer: it is dropped, not acted on.
TWICE_NOTIFICATION = (
    '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9, "requestId": 2}}'
)


def _refused(answer: dict[str, Any], request_id: int) -> None:
    assert answer["id"] == request_id, answer
    error = answer.get("error")
    assert error is not None and error["code"] == -32602, answer
    assert error["message"].startswith("INVALID_INPUT: the key ") and "named twice" in error["message"], (
        answer
    )


@pytest.mark.parametrize("path", ["before the SDK", "after the SDK", "plain"])
def test_over_stdio_a_key_named_twice_is_invalid_input_and_the_session_goes_on(
    peers: Any,  # noqa: F811
    path: str,
) -> None:
    """Over stdio, ``{"text": "a", "text": "b"}`` was served by its last value (pydantic keeps the
    last), where ``coffer-mcp`` over HTTP and ``coffer-api`` refuse it. Each such line now gets
    ``INVALID_INPUT`` under its id, the fast path (lines read while the SDK imports) included, and
    the session serves the next request."""
    env = {"COFFER_MCP_FAST_HANDSHAKE": "0"} if path == "plain" else {}
    peer = peers(env=env)
    peer.send(initialize())
    if path != "before the SDK":
        peer.release()
    assert "result" in peer.answer()
    peer.send(INITIALIZED)
    if path == "after the SDK":
        peer.send(request(1, "ping"))
        assert peer.answer() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    peer.send(TWICE_NOTIFICATION)
    for n, line in enumerate(TWICE):
        peer.send(line)
        _refused(peer.answer(), 2 + n)
    peer.release()
    peer.send(remember(5, "kept e"))
    served = peer.answer()
    assert served["id"] == 5 and served["result"]["isError"] is False, served
    assert peer.close() == 0
    with MemoryService(peer.home) as svc:
        assert [f.fact.body.strip() for f in svc.list_facts(store="global").items] == ["kept e"]


# -- 4. what since/until take, in the tool's schema --------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_recall_since_and_until_say_their_forms_and_zone_rule(
    svc: MemoryService, anyio_backend: str
) -> None:
    """``since``: "Only facts updated since (ISO 8601, or 7d ago)." said neither the duration units
    nor that a time without a zone is UTC (a date: its midnight UTC), which the CLI's help and the
    REST parameters say; an agent in UTC+8 asking for "today" got yesterday's evening too."""
    async with Client(build_server(svc)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    properties = tools["coffer__recall"].input_schema["properties"]
    said = properties["since"]["description"]
    for words in (
        "ISO 8601 date or time",
        "UTC if no zone",
        "a date alone is its midnight UTC",
        "30m, 12h, 7d, 2w",
    ):
        assert words in said, said
    assert "the forms of since" in properties["until"]["description"]


# -- 7. the event stream closed at --max-connections ---------------------------------------------------


def test_a_client_cannot_keep_its_event_streams_by_pinging(tmp_path: Path) -> None:
    """At ``--max-connections`` the event stream of "the session that has done least" was closed,
    counting every request: a client that pinged each of its sessions a few times outranked an
    agent for ever, so each new connection closed the agent's stream (reopened, closed again) and
    never one of the client's. Past the opening, every session now ranks alike and the stream open
    longest goes first: pinging buys no place, and no one holds a stream for ever."""
    import os
    import sys
    from contextlib import ExitStack

    from served import Served
    from test_attack_mcp_sessions import _agent, _ended, _open, _post, _stream, _tools

    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    env = {**os.environ, "COFFER_HOME": str(tmp_path / "home")}
    with Served([*args, "--max-connections", "4"], env) as server, ExitStack() as stack:
        agent = _agent(server.port)
        first = stack.enter_context(_stream(server.port, agent))
        flood = []
        for _ in range(3):
            session = _open(server.port)[1]
            assert _post(server.port, INITIALIZED, session)[0] == 202
            for n in range(12):  # far more than the agent's requests
                assert _post(server.port, request(10 + n, "ping"), session)[0] == 200
            flood.append(stack.enter_context(_stream(server.port, session)))
        assert _tools(server.port, agent) == 200  # past 4 held streams: one gives its place
        assert _ended(first) and not any(_ended(s) for s in flood), "the oldest stream, the agent's"
        again = stack.enter_context(_stream(server.port, agent))  # as a client reopens it
        assert _tools(server.port, agent) == 200
        assert not _ended(again), "the agent's new stream was closed again: the pinging client's stayed"
        assert _ended(flood[0]) and not any(_ended(s) for s in flood[1:]), "the oldest of the client's"

"""A JSON body to ``coffer-mcp --transport streamable-http`` naming one key twice is refused.

``{"text": "a", "text": "b"}`` was taken by its last value, silently, where ``coffer-api`` answers
422 ``INVALID_INPUT`` (review28, session 28): a proxy or a log that read the first value saw
another request than the one served. Over HTTP the request is now answered under its id with
``INVALID_INPUT`` naming the key, and nothing is written. A real ``coffer-mcp`` on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from test_attack_mcp import INIT_PARAMS, http_server

from coffer_memory import MemoryService

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _call(arguments: str, request_id: int = 2) -> bytes:
    return (
        f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
        f'"params": {{"name": "coffer__remember", "arguments": {arguments}}}}}'
    ).encode()


def _message(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of an answer, sent as JSON or as the one event of an event stream."""
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(answer.json())


def _open_session(http: httpx.Client) -> dict[str, str]:
    """The headers of a new MCP session (``initialize`` answered)."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}
    opened = http.post("/mcp", json=init, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    return {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}


def test_a_key_named_twice_is_invalid_input_and_nothing_is_written(tmp_home: Path) -> None:
    server = http_server(tmp_home)
    try:
        with httpx.Client(base_url=server.base, timeout=60) as http:
            session = _open_session(http)
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            for n, body in enumerate(
                (
                    _call('{"text": "kept a", "text": "kept b", "scope": "global"}'),
                    _call('{"text": "kept c", "\\u0074ext": "kept d", "scope": "global"}'),
                    # the envelope's own keys too: which "method" a reader takes is the question
                    b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "method": "tools/call", "params": {}}',
                )
            ):
                answer = http.post("/mcp", content=body, headers=session)
                assert answer.status_code == 200, (n, answer.text)
                message = _message(answer)
                assert message["id"] == 2, (n, message)
                said = message["error"]["message"]
                assert said.startswith("INVALID_INPUT: ") and "named twice" in said, (n, message)
            # A body naming each key once is served as before.
            served = http.post(
                "/mcp", content=_call('{"text": "kept e", "scope": "global"}'), headers=session
            )
            assert served.status_code == 200 and "error" not in _message(served), served.text
    finally:
        server.stop()
    with MemoryService(tmp_home) as svc:
        assert [f.fact.body for f in svc.list_facts(store="global").items] == ["kept e"]


def test_a_notification_naming_a_key_twice_is_refused_with_400_and_no_id(tmp_home: Path) -> None:
    # Over stdio it is dropped (``_screen``); over HTTP the SDK took its last value and answered
    # 202. The streamable-HTTP transport says a notification the server cannot accept gets an HTTP
    # error status (400), its body MAY be a JSON-RPC error with no id: coffer-api's INVALID_INPUT.
    server = http_server(tmp_home)
    try:
        with httpx.Client(base_url=server.base, timeout=60) as http:
            session = _open_session(http)
            twice = (
                b'{"jsonrpc": "2.0", "method": "notifications/cancelled", '
                b'"method": "notifications/initialized"}'
            )
            answer = http.post("/mcp", content=twice, headers=session)
            assert answer.status_code == 400, answer.text
            message = answer.json()
            assert message.get("id") is None, message
            said = message["error"]["message"]
            assert said.startswith("INVALID_INPUT: ") and "named twice" in said, message
            # The same notification naming each key once is accepted as before.
            once = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            accepted = http.post("/mcp", json=once, headers=session)
            assert accepted.status_code == 202 and accepted.content == b"", accepted.text
    finally:
        server.stop()

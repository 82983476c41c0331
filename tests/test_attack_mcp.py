"""The MCP face attacked: unknown tools and prompts, a tool that crashes, oversized and malformed
requests, and a call in flight when the client shuts the server down.

Through the SDK's own client (in process, and over stdio for ``coffer-mcp``), and line by line over
stdio where the SDK's client would never send such a request.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import failing_backend
import httpx
import pytest
from conftest import git
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, CallToolResult, TextContent
from served import Served
from test_mcp import ok
from test_mcp_surrogates import StdioPeer, peer  # noqa: F401 (the fixture)

from coffer_memory import MemoryService
from coffer_memory_mcp import build_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def error_of(result: CallToolResult) -> dict[str, Any]:
    """The error envelope of a failed call (its text starts with the same code and message)."""
    assert result.is_error and result.structured_content is not None, result
    error: dict[str, Any] = result.structured_content["error"]
    assert set(error) == {"code", "message", "details"}
    [text] = [block.text for block in result.content if isinstance(block, TextContent)]
    assert text.startswith(f"{error['code']}: {error['message']}")
    return error


async def test_an_unknown_tool_is_not_found_with_the_envelope(svc: MemoryService) -> None:
    # The SDK answered "Unknown tool: ..." with no code a program could branch on.
    async with Client(build_server(svc)) as client:
        error = error_of(await client.call_tool("coffer__forget", {"id": "x"}))
    assert error["code"] == "NOT_FOUND" and error["details"] == {"tool": "coffer__forget"}
    assert "coffer__recall" in error["message"] and "coffer__remember" in error["message"]


async def test_a_tool_that_fails_unexpectedly_answers_internal_over_stdio(
    tmp_home: Path, tmp_path: Path
) -> None:
    # A plugin's own bug (a shared index backend whose search raises a plain RuntimeError, a real
    # distribution chosen in config.toml) fails the recall inside the core; the SDK answered
    # "Error executing tool ..." and no envelope. (A folder where the file should be was the case
    # here until it became INDEX_UNAVAILABLE: test_attack_home_entries; a word table made a plain
    # one, a planted trigger, a CHECK written into a table, a blob where a text belongs, bytes that
    # are not UTF-8 and a chunk id that is none, until each became damage: test_attack_left_open..4,
    # test_header_values, test_index_values28.)
    with MemoryService(tmp_home) as svc:
        svc.remember("deploys go out on Tuesdays", store="global")
    env = failing_backend.install(tmp_path / "site", tmp_home)
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer_memory_mcp.cli"], env=env)
    async with Client(params) as client:
        recall = error_of(
            await client.call_tool("coffer__recall", {"query": "deploys", "cwd": str(tmp_home)})
        )
        again = error_of(await client.call_tool("coffer__recall", {"query": " ", "cwd": str(tmp_home)}))
    assert recall["code"] == "INTERNAL" and recall["details"] == {"type": "RuntimeError"}
    assert "Traceback" not in recall["message"] and str(tmp_home) not in recall["message"]
    assert again["code"] == "INVALID_INPUT"  # the server is still up


async def test_an_unknown_prompt_or_prompt_argument_is_invalid_input(svc: MemoryService) -> None:
    # The SDK answered "Internal server error" and logged a traceback for each.
    async with Client(build_server(svc)) as client:
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("nosuch")
        with pytest.raises(MCPError) as stray:
            await client.get_prompt("resume", {"branch": "main"})
        assert (await client.get_prompt("resume", {"cwd": "/"})).messages
    assert unknown.value.code == INVALID_PARAMS
    assert unknown.value.message == "INVALID_INPUT: there is no prompt 'nosuch'; the prompts are resume"
    assert stray.value.code == INVALID_PARAMS
    assert stray.value.message == "INVALID_INPUT: prompt resume takes no argument 'branch'; it takes cwd"


@pytest.mark.parametrize("field", ["since", "until", "cwd"])
async def test_an_oversized_argument_is_refused_without_being_echoed(svc: MemoryService, field: str) -> None:
    # The core's message quotes the value it refuses: a megabyte in came back twice over.
    async with Client(build_server(svc)) as client:
        result = await client.call_tool("coffer__recall", {"query": "deploys", field: "x" * 1_000_000})
    error = error_of(result)
    assert error["code"] == "INVALID_INPUT" and error["details"] == {"field": field}
    assert len(json.dumps(result.model_dump(mode="json"))) < 2000


# -- over stdio, line by line -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "request_line",
    [
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "x"},
        {"jsonrpc": "1.0", "id": 7, "method": "ping"},
        {"id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": ["coffer__recall"]},
    ],
)
def test_a_request_that_is_not_json_rpc_is_answered_not_dropped(
    peer: StdioPeer,  # noqa: F811
    request_line: dict[str, Any],
) -> None:
    peer.send(json.dumps(request_line))
    answer = peer.answer()
    assert answer is not None, "the request was never answered: the client waits for ever"
    assert answer["id"] == 7 and answer["error"]["code"] == INVALID_REQUEST
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 8, "result": {}}


@pytest.mark.parametrize("depth", [300, 100_000])
def test_a_deeply_nested_request_does_not_end_the_server(
    peer: StdioPeer,  # noqa: F811
    depth: int,
) -> None:
    # The SDK's parser refuses it ("recursion limit exceeded"); reading its id again with Python's
    # json raised RecursionError in the server's read loop, and coffer-mcp exited.
    tags = b"[" * depth + b"]" * depth
    peer.send(
        '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "coffer__recall", '
        f'"arguments": {{"query": "x", "tags": {tags.decode()}}}}}}}'
    )
    if depth < 900:  # Python's json reads it: the id is answered
        answer = peer.answer()
        assert answer is not None and answer["id"] == 5 and answer["error"]["code"] == INVALID_REQUEST
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 6, "result": {}}


def test_a_number_longer_than_python_converts_is_answered_not_dropped(
    peer: StdioPeer,  # noqa: F811
) -> None:
    # 5,000 digits: pydantic refuses the line ("number out of range") and Python's json raises
    # ValueError past sys.get_int_max_str_digits(), so coffer read no id and the SDK dropped the
    # request: the client waited for ever for its tool call.
    digits = "1" * 5000
    peer.send(
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "coffer__recall", '
        f'"arguments": {{"query": "x", "limit": {digits}}}}}}}'
    )
    answer = peer.answer()
    assert answer is not None, "the request was never answered: the client waits for ever"
    assert answer["id"] == 3 and answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"].startswith(
        "INVALID_INPUT: limit holds a number of more than"
    )
    peer.send(f'{{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {{"_meta": {{"n": {digits}}}}}}}')
    answer = peer.answer()
    assert answer is not None and answer["id"] == 4 and answer["error"]["message"].startswith("INVALID_INPUT")
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping"}))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 6, "result": {}}


def test_a_call_in_flight_when_input_ends_is_still_answered(
    peer: StdioPeer,  # noqa: F811
    tmp_home: Path,
) -> None:
    # A client shutting down closes the server's stdin: the fact was written and its answer,
    # the only proof a client gets, was dropped with the cancelled request.
    call = {"name": "coffer__remember", "arguments": {"text": "written at shutdown", "scope": "global"}}
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
    assert peer.proc.stdin is not None
    peer.proc.stdin.close()
    lines = []
    while (line := peer.answer(60)) is not None:  # to the end of its output
        lines.append(line)
    assert peer.proc.wait(timeout=60) == 0
    [answer] = [line for line in lines if line.get("id") == 3]
    assert answer["result"]["isError"] is False, answer
    with MemoryService(tmp_home) as svc:
        [record] = svc.list_facts(store="global").items
    assert answer["result"]["structuredContent"]["id"] == record.fact.id


# -- over HTTP --------------------------------------------------------------------------------------
def test_over_http_the_token_scheme_is_read_in_any_case_and_every_refusal_is_the_envelope(
    tmp_home: Path,
) -> None:
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_MCP_TOKEN": "s3cret"}
    server = Served(args, env)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    try:
        with httpx.Client(base_url=server.base, timeout=60) as http:
            for wrong in ({}, {"Authorization": "Bearer s3cre"}, {"Authorization": "Basic s3cret"}):
                refused = http.post("/mcp", json=init, headers={**accept, **wrong})
                assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
                assert refused.json() == {
                    "error": {
                        "code": "UNAUTHORIZED",
                        "message": "missing or wrong bearer token",
                        "details": {},
                    }
                }
            for scheme in ("Bearer", "bearer", "BEARER"):
                served = http.post("/mcp", json=init, headers={**accept, "Authorization": f"{scheme} s3cret"})
                assert served.status_code == 200, (scheme, served.text)
            # The SDK's own refusals, in plain text before: the envelope with the SDK's words; a
            # foreign Host or Origin is refused as coffer-api refuses it, naming what was refused.
            authed = {**accept, "Authorization": "Bearer s3cret"}
            for status, code, details, request in [
                (
                    421,
                    "HOST_NOT_ALLOWED",
                    {"host": "evil.example"},
                    {"json": init, "headers": {**authed, "Host": "evil.example"}},
                ),
                (
                    403,
                    "ORIGIN_NOT_ALLOWED",
                    {"origin": "http://evil.example"},
                    {"json": init, "headers": {**authed, "Origin": "http://evil.example"}},
                ),
            ]:
                refused = http.post("/mcp", **request)  # type: ignore[arg-type]
                assert refused.status_code == status and refused.json()["error"]["code"] == code, refused.text
                assert refused.json()["error"]["message"] and refused.json()["error"]["details"] == details
            # A wrong Content-Type is coffer-api's 415, as the JSON-RPC error object the SDK answers
            # its own 415 with (tests/test_http_faces_agree.py has every case).
            wrong = http.post("/mcp", content=b"{}", headers={**authed, "Content-Type": "text/plain"})
            assert wrong.status_code == 415 and wrong.json()["error"]["code"] == -32600, wrong.text
            assert wrong.json()["error"]["message"].startswith("UNSUPPORTED_MEDIA_TYPE: "), wrong.text
            missing = http.get("/elsewhere", headers=authed)
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    finally:
        server.stop()


# -- the repository a cwd names is the attacker's ---------------------------------------------------
async def test_resume_in_a_repository_whose_config_names_a_program_runs_nothing(
    svc: MemoryService, repo: Path, tmp_path: Path
) -> None:
    # `cwd` may name any folder (an agent told so by a page it read, or a checkout unpacked from an
    # archive with its .git). The repository's own config is then the attacker's: with
    # log.showSignature on, `git log` runs gpg.program for each signed commit it lists, and resume
    # listed the commits since the handoff with `git log`.
    marker = tmp_path / "ran"
    program = tmp_path / "fake-gpg"
    program.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    program.chmod(0o755)
    async with Client(build_server(svc)) as client:
        ok(await client.call_tool("coffer__handoff", {"text": "Half-way.", "cwd": str(repo)}))
        # A commit carrying a signature header (its content does not matter: gpg.program is run).
        tree, parent = git(repo, "rev-parse", "HEAD^{tree}"), git(repo, "rev-parse", "HEAD")
        commit = (
            f"tree {tree}\nparent {parent}\nauthor a <a@b> 1700000000 +0000\n"
            "committer a <a@b> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQ==\n"
            " -----END PGP SIGNATURE-----\n\nsigned on the way\n"
        )
        (tmp_path / "commit").write_text(commit)
        signed = git(repo, "hash-object", "-t", "commit", "-w", str(tmp_path / "commit"))
        git(repo, "update-ref", "refs/heads/main", signed)
        git(repo, "config", "log.showSignature", "true")
        git(repo, "config", "gpg.program", str(program))
        moved = ok(await client.call_tool("coffer__resume", {"cwd": str(repo)}))
    assert moved["head_moved"] and any("signed on the way" in c for c in moved["new_commits"])
    assert not marker.exists()


def test_git_never_reads_the_protocol_stream_over_stdio(
    peer: StdioPeer,  # noqa: F811
    repo: Path,
) -> None:
    # Were git to inherit coffer-mcp's stdin, the client's JSON-RPC stream, a repository whose
    # config includes /dev/stdin would make git read the next requests as config (lost, never
    # answered) or wait for them: the stdio server keeps the stream on another descriptor.
    git(repo, "config", "include.path", "/dev/stdin")
    params = {"name": "coffer__resume", "arguments": {"cwd": str(repo)}}
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    answers = {answer["id"]: answer for answer in (peer.answer(), peer.answer()) if answer is not None}
    assert set(answers) == {1, 2}, answers
    assert answers[1]["result"]["structuredContent"]["head"] == git(repo, "rev-parse", "HEAD")


def test_git_never_reads_the_servers_stdin_over_http(tmp_home: Path, repo: Path) -> None:
    # Over HTTP (and in coffer-api) stdin is whatever started the server: a terminal, a pipe. git
    # inherited it, so a repository whose config includes /dev/stdin read it as config: a terminal
    # blocked each call until git's timeout, and what a pipe held broke git (HEAD unknown here).
    git(repo, "config", "include.path", "/dev/stdin")
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    stdin = tempfile.TemporaryFile()  # noqa: SIM115  (the server reads it as long as it runs)
    stdin.write(b"not [[[ a config\n")  # what a pipe held: git read it before
    stdin.seek(0)
    server = Served(args, env, stdin=stdin)
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    accept = {"Accept": "application/json, text/event-stream"}
    try:
        with httpx.Client(base_url=server.base, timeout=60) as http:
            opened = http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
                headers=accept,
            )
            session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            params = {"name": "coffer__resume", "arguments": {"cwd": str(repo)}}
            called = http.post(
                "/mcp",
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params},
                headers=session,
            )
    finally:
        server.stop()
    [data] = [line.removeprefix("data: ") for line in called.text.splitlines() if line.startswith("data: ")]
    resumed = json.loads(data)["result"]["structuredContent"]
    assert resumed["head"] == git(repo, "rev-parse", "HEAD")


INIT_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"},
}


def http_server(home: Path) -> Served:
    """``coffer-mcp --transport streamable-http`` serving ``home``, without a token."""
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    return Served(args, {**os.environ, "COFFER_HOME": str(home)})


def test_over_http_an_absolute_form_target_is_served_by_the_host_it_names(tmp_home: Path) -> None:
    # RFC 9112 3.2.2: the target's host, not Host, is the request's; the SDK read Host and served
    # "POST http://evil.example/mcp".
    server = http_server(tmp_home)
    init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}).encode()
    answers = []
    try:
        for target, host in (
            ("http://evil.example/mcp", f"127.0.0.1:{server.port}"),
            (f"http://127.0.0.1:{server.port}/mcp", "evil.example"),
        ):
            request = (
                f"POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\n"
                f"Content-Length: {len(init)}\r\nConnection: close\r\n\r\n"
            ).encode() + init
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as conn:
                conn.sendall(request)
                answer = b""
                while chunk := conn.recv(65536):
                    answer += chunk
            answers.append(answer)
    finally:
        server.stop()
    assert answers[0].startswith(b"HTTP/1.1 421 "), answers[0][:300]
    assert b'"HOST_NOT_ALLOWED"' in answers[0]
    assert answers[1].startswith(b"HTTP/1.1 200 "), answers[1][:300]


def test_over_http_a_lone_surrogate_is_invalid_input_as_over_stdio(tmp_home: Path) -> None:
    # The SDK's transport answered "400 Parse error: unexpected end of hex escape" with id null to
    # JSON that parses (the escape is well formed); stdio answers the request: INVALID_INPUT.
    server = http_server(tmp_home)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    call = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "coffer__remember", '
    call += '"arguments": {"text": "a\\ud800b", "scope": "global"}}}'
    ping = '{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": {"x": "\\udfff"}}}'
    try:
        with httpx.Client(base_url=server.base, timeout=60) as http:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}
            opened = http.post("/mcp", json=init, headers=headers)
            assert opened.status_code == 200, opened.text
            session = {**headers, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            called = http.post("/mcp", content=call.encode(), headers=session)
            assert called.status_code == 200, called.text
            result = called.json()
            assert result["id"] == 2 and result["result"]["isError"] is True, result
            assert result["result"]["content"][0]["text"].startswith(
                "INVALID_INPUT: text contains a lone surrogate"
            )
            pinged = http.post("/mcp", content=ping.encode(), headers=session).json()
            assert pinged["id"] == 3 and pinged["error"]["message"].startswith("INVALID_INPUT"), pinged
            # The transport's own checks come first: a foreign Host or Origin is refused as before.
            for foreign in ({"Host": "evil.example"}, {"Origin": "http://evil.example"}):
                refused = http.post("/mcp", content=call.encode(), headers={**session, **foreign})
                assert refused.status_code in (403, 421), refused.text
                assert refused.json()["error"]["code"] in ("HOST_NOT_ALLOWED", "ORIGIN_NOT_ALLOWED")
    finally:
        server.stop()
    with MemoryService(tmp_home) as svc:
        assert not svc.list_facts(store="global").items


def test_over_http_a_head_that_never_ends_is_refused_before_it_is_held(tmp_home: Path) -> None:
    # httptools keeps a header value whole until it ends: one that never ended was held in memory,
    # hundreds of megabytes, before the token was checked. Now: 400 and closed while it comes.
    args = [sys.executable, "-m", "coffer_memory_mcp.cli", "--transport", "streamable-http"]
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_MCP_TOKEN": "s3cret"}
    server = Served(args, env)
    port = server.port
    answer, cut_off = b"", False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
            try:
                conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Big: ".encode())
                for _ in range(256):  # 16 MiB at the most
                    conn.sendall(b"a" * 65536)
            except OSError:  # refused and closed while we were still sending
                cut_off = True
            with contextlib.suppress(OSError):  # the 400 may be lost to the reset
                while chunk := conn.recv(65536):
                    answer += chunk
    finally:
        server.stop()
    # Before, every byte was taken and nothing came back (the recv above waited in vain).
    assert cut_off or answer.startswith(b"HTTP/1.1 400 Bad Request"), answer[:200]


BATCH_REFUSED = "JSON-RPC batches are not supported"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # A batch: JSON-RPC 2.0 answers it with an array; MCP has no batches, so each request in it
        # is refused under its own id (the notification in it gets nothing, as JSON-RPC says).
        (
            '[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "n"}, '
            '{"jsonrpc": "2.0", "id": "b", "method": "ping"}, 3]',
            [(1, BATCH_REFUSED), ("b", BATCH_REFUSED), (None, BATCH_REFUSED)],
        ),
        ("[]", (None, "an empty batch")),
        ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', (None, "the request id must be")),
        ('{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', (None, "the request id must be")),
        ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', (None, "the request id must be")),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', (None, "the request id must be")),
        (
            '{"jsonrpc": "2.0", "id": ' + "7" * 5000 + ', "method": "ping"}',
            (None, "the request id is a number"),
        ),
    ],
    ids=["batch", "empty-batch", "object-id", "fraction-id", "null-id", "bool-id", "huge-id"],
)
def test_a_batch_or_an_unreadable_id_is_answered_invalid_request_not_dropped(
    peer: StdioPeer,  # noqa: F811
    line: str,
    expected: Any,
) -> None:
    # The SDK refused a batch and took a request with an object id for a notification: both were
    # dropped without a word, and a client waited for ever. JSON-RPC 2.0 asks for Invalid Request
    # (id null where no id could be read; a batch's answers in one array).
    peer.send(line)
    answer: Any = peer.answer()
    assert answer is not None, "the line was never answered: the client waits for ever"
    errors = answer if isinstance(expected, list) else [answer]
    wanted = expected if isinstance(expected, list) else [expected]
    assert isinstance(answer, list) == isinstance(expected, list)
    assert [(e["id"], e["error"]["code"]) for e in errors] == [(i, INVALID_REQUEST) for i, _ in wanted]
    assert all(e["error"]["message"].startswith(m) for e, (_, m) in zip(errors, wanted, strict=True))
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 8, "result": {}}


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("this is not json", -32700),
        ('{"jsonrpc": "2.0", "id": 4, "method": "ping"', -32700),  # cut short
        ('{"jsonrpc": "2.0", "id": 4, "method": "ping"} {}', -32700),  # two messages on one line
        ('{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": {"a": "\\x"}}}', -32700),
        ("42", INVALID_REQUEST),  # JSON, but no message
        ('"ping"', INVALID_REQUEST),
    ],
    ids=["prose", "cut-short", "two-on-a-line", "bad-escape", "number", "string"],
)
def test_a_line_that_is_not_json_is_answered_parse_error_with_id_null(
    peer: StdioPeer,  # noqa: F811
    line: str,
    code: int,
) -> None:
    # The SDK logged such a line and answered nothing, so a client whose line was cut short waited
    # for ever. JSON-RPC 2.0 asks for Parse error (-32700) with id null; MCP (2025-11-25) lets an
    # error go without the request's id when the id could not be read. Then the session goes on.
    peer.send(line)
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
    answer = peer.answer()  # before, the ping's answer came first: the line had none
    assert answer is not None and answer["id"] is None, answer
    assert answer["error"]["code"] == code and answer["error"]["message"], answer
    assert peer.answer() == {"jsonrpc": "2.0", "id": 8, "result": {}}


def test_a_blank_line_carries_no_message_and_gets_no_answer(peer: StdioPeer) -> None:  # noqa: F811
    peer.send("")
    peer.send("   ")
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 8, "result": {}}

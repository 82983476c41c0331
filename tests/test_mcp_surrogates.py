"""Lone surrogates over MCP: an INVALID_INPUT tool error, never silence and never a written file.

In process through the SDK's client; over stdio by speaking JSON-RPC lines to ``coffer-mcp``
ourselves, because the SDK's client cannot even encode such a string (a JavaScript client's
``JSON.stringify`` can: it writes ``"\\ud800"``).
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import select
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import TextContent
from test_mcp_handshake import INITIALIZED, initialize, peers, recorded, request  # noqa: F401 (fixtures)

from coffer_memory import MemoryService
from coffer_memory_mcp import build_server

LONE = "a\ud800b"


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_every_text_argument_with_a_lone_surrogate_is_invalid_input(
    svc: MemoryService, repo: Path, anyio_backend: str
) -> None:
    calls = [
        ("coffer__remember", {"text": LONE, "cwd": str(repo)}, "text"),
        ("coffer__remember", {"text": "fine", "title": "\udfff", "scope": "global"}, "title"),
        ("coffer__remember", {"text": "fine", "description": "\udc80", "scope": "global"}, "description"),
        ("coffer__recall", {"query": LONE, "cwd": str(repo)}, "query"),
        ("coffer__list_memory", {"cursor": LONE, "scope": "global"}, "cursor"),
        ("coffer__handoff", {"text": LONE, "cwd": str(repo)}, "text"),
        ("coffer__resume", {"cwd": str(repo) + "\ud800"}, "cwd"),
    ]
    async with Client(build_server(svc)) as client:
        for tool, arguments, field in calls:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, field)
            assert text_of(result).startswith(f"INVALID_INPUT: {field} contains a lone surrogate"), tool
    assert not svc.list_facts(store="global").items
    assert not svc.list_facts(cwd=repo).items


class StdioPeer:
    """``coffer-mcp`` over stdio, driven line by line as a non-Python client would."""

    def __init__(
        self, home: Path, argv: tuple[str, ...] = (sys.executable, "-m", "coffer_memory_mcp.cli")
    ) -> None:
        env = {**os.environ, "COFFER_HOME": str(home)}
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._pending = b""  # what the server wrote past the last line ``answer`` gave
        self.last = b""  # that line

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("ascii") + b"\n")
        self.proc.stdin.flush()

    def answer(self, bound: float = 180) -> dict[str, Any] | None:
        """The next line the server writes, or None if it says nothing within ``bound`` seconds
        (a bound for a hung server, not a measurement: a first call that opens the index took
        over 60 s once under a load of 16) or ends its output.

        Read from the descriptor into a buffer of our own: ``select`` on the pipe after a
        buffered ``readline`` missed a second line the same read had taken in (two answers
        written together, as a loaded machine lets them be), waited out the bound and said None
        (test_git_never_reads_the_protocol_stream_over_stdio[cli] under load 12-15)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + bound
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        self.last = line
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# ``coffer-mcp`` (the installed command, whose stdio loop answers the handshake itself) and the
# SDK-only path ``python -m coffer_memory_mcp.cli``.
COMMANDS = {
    "coffer-mcp": (str(Path(sys.executable).parent / "coffer-mcp"),),
    "cli": (sys.executable, "-m", "coffer_memory_mcp.cli"),
}


@pytest.fixture(params=list(COMMANDS))
def peer(tmp_home: Path, request: pytest.FixtureRequest) -> Iterator[StdioPeer]:
    p = StdioPeer(tmp_home, COMMANDS[request.param])
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    p.send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}))
    assert p.answer() is not None
    p.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield p
    p.close()


def test_two_answers_written_before_they_are_read_are_both_read(peer: StdioPeer) -> None:
    """Both answers in the pipe before the client reads (a loaded machine lets the server write
    them together): ``answer`` read the first with a buffered ``readline``, which took the second
    in too, then waited on the pipe for it, said nothing for 180 s and gave None."""
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    assert peer.answer() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    both = 2 * (len(peer.last) + 1)  # the answers to ids 2 and 3: as long as the one to id 1
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
    assert peer.proc.stdout is not None
    held = array.array("i", [0])
    for _ in range(3600):  # until the pipe holds both (a bound on a loaded machine, not a timing)
        fcntl.ioctl(peer.proc.stdout.fileno(), termios.FIONREAD, held)
        if held[0] >= both:
            break
        time.sleep(0.05)
    assert held[0] >= both, held[0]
    assert [peer.answer(30), peer.answer(30)] == [{"jsonrpc": "2.0", "id": i, "result": {}} for i in (2, 3)]


def _call(request_id: int, arguments: dict[str, Any]) -> str:
    params = {"name": "coffer__remember", "arguments": arguments}
    # json.dumps writes a lone surrogate as the escape "\ud800", exactly what such a client sends.
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def test_over_stdio_a_lone_surrogate_is_answered_not_dropped(peer: StdioPeer, tmp_home: Path) -> None:
    peer.send(_call(1, {"text": LONE, "scope": "global"}))
    answer = peer.answer()
    assert answer is not None and answer["id"] == 1, "the request was never answered"
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"].startswith("INVALID_INPUT: text contains a lone surrogate")

    peer.send(json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping", "params": {"_meta": {"x": LONE}}}))
    answer = peer.answer()
    assert answer is not None and answer["id"] == "p"
    assert answer["error"]["message"].startswith("INVALID_INPUT")

    peer.send(_call(2, {"text": "still serving after that", "scope": "global"}))
    answer = peer.answer()
    assert answer is not None and answer["id"] == 2 and answer["result"]["isError"] is False
    with MemoryService(tmp_home) as svc:
        assert [r.fact.body.strip() for r in svc.list_facts(store="global").items] == [
            "still serving after that"
        ]


def test_over_stdio_json_nested_too_deep_leaves_the_server_serving(peer: StdioPeer) -> None:
    # ``[[[…`` 100,000 deep in a request: Python's json raised RecursionError in coffer-mcp's own
    # reading of the line, and the server died with a traceback (every later request unanswered).
    # It is now a line that does not parse, as any other (the SDK then drops it).
    deep = "[" * 100_000 + "]" * 100_000
    peer.send('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ' + deep + "}")
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    answer = peer.answer()
    assert answer is not None and answer["id"] == 2, "the server stopped answering"
    assert peer.proc.poll() is None


def test_over_stdio_a_lone_surrogate_in_an_id_is_answered_and_the_server_serves_on(peer: StdioPeer) -> None:
    # The SDK refused the line, coffer answered it under its id, and writing that id (a string
    # holding "\ud800") raised in the SDK's writer: coffer-mcp died with a traceback, exit 1.
    peer.send(_call(1, {"text": "fine", "scope": "global"}).replace('"id": 1', '"id": "a\\ud800"'))
    answer = peer.answer()
    assert answer is not None, "the request was never answered"
    assert answer["id"] is None and answer["error"]["code"] == -32600, answer
    assert "lone surrogate" in answer["error"]["message"]
    peer.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    answer = peer.answer()
    assert answer is not None and answer["id"] == 2, "the server stopped answering"
    assert peer.proc.poll() is None


# Lines the snapshot could answer by their method, that the SDK refuses: the fast path took them
# while the SDK was importing (an initialize and a ping holding "\ud800" were answered as fine).
REFUSED_BY_THE_SDK = (
    '{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
    '"capabilities": {}, "clientInfo": {"name": "a\\ud800", "version": "1"}}}',
    '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"x": "\\udfff"}}}',
    '{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": 5}}',
)


@pytest.mark.parametrize("first", [0, 1])
def test_what_the_sdk_refuses_is_refused_on_the_fast_path_too(peers: Any, first: int) -> None:  # noqa: F811
    fast = peers("fast")
    plain = peers("plain", env={"COFFER_MCP_FAST_HANDSHAKE": "0"})
    lines = [*REFUSED_BY_THE_SDK[1:], request(3, "ping")]
    handshake = (
        [REFUSED_BY_THE_SDK[0]] if first == 0 else [json.dumps(initialize(0)), json.dumps(INITIALIZED)]
    )
    got = []
    for peer in (fast, plain):
        for line in (*handshake, *lines):
            peer.send(line)
        if peer is fast:
            assert "the SDK server is ready" not in peer.stderr()
        peer.release()
        got.append(peer.answers(4))
        assert peer.close() == 0
    assert got[0] == got[1]
    assert "error" in got[0][1] and "error" in got[0][2] and got[0][3]["result"] == {}
    assert ("error" in got[0][0]) == (first == 0)

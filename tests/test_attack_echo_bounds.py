"""No error repeats a caller's value unbounded, on any face.

About 25 ``InvalidInput`` raises (and ``SCOPE_UNRESOLVED``, an import's source, a store setting's
key) put the value they refused into the message whole: a megabyte ``mode`` came back as a
megabyte of error on every face, and a terminal escape in it retitled the terminal of whoever
read the CLI's error. Each input below is a terminal escape followed by a large value; every error
must stay small and clean. A new raise that echoes its input whole fails here, through the
backstop in ``CofferError`` (``MESSAGE_LIMIT``, ``DETAIL_LIMIT``), whatever the raise does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import TextContent

from coffer_memory import CofferError, MemoryService
from coffer_memory._errors import DETAIL_LIMIT, MESSAGE_LIMIT
from coffer_memory_mcp import build_server

ESCAPE = "\x1b]0;owned\x07\x1b[2J"
BIG = ESCAPE + "A" * 1_000_000
SMALL_ENOUGH = 4096  # bytes of any one error, envelope and all
G = {"scope": "global"}

LIBRARY: dict[str, Callable[[Any, Any], Any]] = {  # Any: the values are wrong on purpose
    "recall mode": lambda s, v: s.recall("x", mode=v, stores=["global"]),
    "recall since": lambda s, v: s.recall("x", since=v, stores=["global"]),
    "recall until": lambda s, v: s.recall("x", until=v, stores=["global"]),
    "recall stores as one string": lambda s, v: s.recall("x", stores=v),
    "recall cwd": lambda s, v: s.recall("x", cwd=v),
    "remember scope": lambda s, v: s.remember("x", scope=v),
    "remember cwd": lambda s, v: s.remember("x", cwd="/tmp/" + v[:200_000]),
    "remember store": lambda s, v: s.remember("x", store=v),
    "remember tag": lambda s, v: s.remember("x", tags=[v], **G),
    "list since": lambda s, v: s.list_facts(since=v, **G),
    "list limit": lambda s, v: s.list_facts(limit=v, **G),
    "list cursor": lambda s, v: s.list_facts(cursor=v, **G),
    "audit event": lambda s, v: s.audit(event=v),
    "audit until": lambda s, v: s.audit(until=v),
    "fact id": lambda s, v: s.get_fact(v, **G),
    "journal period": lambda s, v: s.delete_journal(v, store="global"),
    "handoff branch": lambda s, v: s.delete_handoff(v, store="global"),
    "agent name": lambda s, v: s.agent_status(v),
    "agent install": lambda s, v: s.install_agent(v),
    "transcripts agent": lambda s, v: s.list_transcripts(v),
    "transcripts sort": lambda s, v: s.list_transcripts("claude-code", sort=v),
    "transcripts order": lambda s, v: s.list_transcripts("claude-code", order=v),
    "transcripts limit": lambda s, v: s.list_transcripts("claude-code", limit=v),
    "transcripts offset": lambda s, v: s.list_transcripts("claude-code", offset=v),
    "session id": lambda s, v: s.show_transcript("claude-code", v),
    "store setting key": lambda s, v: s.set_store_config("global", {v: 1}),
    "import source": lambda s, v: s.import_memory("/tmp/" + v[:200_000]),
    "export destination": lambda s, v: s.export_memory("/tmp/" + v[:5000] + "/x.zip"),
    "distill agent": lambda s, v: s.distill_session(v, "x"),
    "sweep agent": lambda s, v: s.sweep(v),
    "resolve scope": lambda s, v: s.resolve_scope(scope=v),
}


def assert_small_and_clean(text: str) -> None:
    assert len(text.encode()) <= SMALL_ENOUGH, (len(text), text[:200])
    assert "\x1b" not in text and "\\u001b" not in text and "\x07" not in text, text[:200]


@pytest.mark.parametrize("call", LIBRARY.values(), ids=list(LIBRARY))
def test_the_library_names_a_bad_value_bounded(svc: MemoryService, call: Callable[..., Any]) -> None:
    with pytest.raises(CofferError) as caught:
        call(svc, BIG)
    error = caught.value
    assert len(error.message) <= MESSAGE_LIMIT
    assert all(len(v) <= DETAIL_LIMIT for v in error.details.values() if isinstance(v, str))
    assert_small_and_clean(json.dumps(error.to_dict()))


def test_the_backstop_holds_for_a_raise_that_does_not_cut() -> None:
    from coffer_memory import InvalidInput

    error = InvalidInput(f"no such thing: {BIG!r}", field="x", value=BIG, values=[BIG])
    assert len(error.message) == MESSAGE_LIMIT and error.message.endswith("…")
    assert len(error.details["value"]) == DETAIL_LIMIT and len(error.details["values"][0]) == DETAIL_LIMIT
    assert_small_and_clean(json.dumps(error.to_dict()))
    kept = InvalidInput("two lines\n\tand a tab stay", field="x")
    assert kept.message == "two lines\n\tand a tab stay"


# An address is at most 64 KiB for the client; a body stays under the REST body bound (1 MiB).
REST_BIG = ESCAPE + "A" * 60_000
BODY_BIG = ESCAPE + "A" * 500_000
IN_PATH = "%1B%5D0%3Bowned%07" + "A" * 60_000  # the escape, percent-encoded as a path must be
API = "/api/v1/memory_stores"
REST: dict[str, tuple[str, str, dict[str, Any]]] = {
    "recall mode": ("GET", f"{API}/global/recall", {"params": {"query": "x", "mode": REST_BIG}}),
    "recall since": ("GET", f"{API}/global/recall", {"params": {"query": "x", "since": REST_BIG}}),
    "recall cwd": ("GET", f"{API}/recall", {"params": {"query": "x", "cwd": REST_BIG}}),
    "facts since": ("GET", f"{API}/global/facts", {"params": {"since": REST_BIG}}),
    "facts cursor": ("GET", f"{API}/global/facts", {"params": {"cursor": REST_BIG}}),
    "audit event": ("GET", "/api/v1/audit", {"params": {"event": REST_BIG}}),
    "handoff branch": ("DELETE", f"{API}/global/handoff/{IN_PATH}", {}),
    "journal period": ("DELETE", f"{API}/global/journal/{IN_PATH}", {}),
    "agent": ("GET", f"/api/v1/agents/{IN_PATH}", {}),
    "transcripts sort": ("GET", "/api/v1/agents/claude-code/transcripts", {"params": {"sort": REST_BIG}}),
    "store": ("GET", f"{API}/{IN_PATH}", {}),
    "store setting key": ("PATCH", f"{API}/global/config", {"json": {BODY_BIG: 1}}),
    "fact in body": ("POST", f"{API}/global/facts", {"json": {"text": "x", "tags": [BODY_BIG]}}),
}


@pytest.mark.parametrize("request_", REST.values(), ids=list(REST))
def test_rest_names_a_bad_value_bounded(client: Any, request_: tuple[str, str, dict[str, Any]]) -> None:
    method, path, kwargs = request_
    answer = client.request(method, path, **kwargs)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])
    assert_small_and_clean(answer.text)


MCP: dict[str, tuple[str, dict[str, Any]]] = {
    "recall mode": ("coffer__recall", {"query": "x", "mode": BIG}),
    "recall since": ("coffer__recall", {"query": "x", "since": BIG}),
    "recall cwd": ("coffer__recall", {"query": "x", "cwd": BIG[:200_000]}),
    "list cursor": ("coffer__list_memory", {"scope": "global", "cursor": BIG}),
    "list scope": ("coffer__list_memory", {"scope": BIG}),
    "remember cwd": ("coffer__remember", {"text": "x", "cwd": "/tmp/" + BIG[:200_000]}),
    "handoff cwd": ("coffer__handoff", {"text": "x", "cwd": BIG[:200_000]}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("call", MCP.values(), ids=list(MCP))
async def test_mcp_names_a_bad_value_bounded(svc: MemoryService, call: tuple[str, dict[str, Any]]) -> None:
    name, arguments = call
    async with Client(build_server(svc)) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error
    assert_small_and_clean("\n".join(b.text for b in result.content if isinstance(b, TextContent)))


# An argument of the command line is at most 128 KiB on Linux.
CLI_BIG = ESCAPE + "A" * 100_000
CLI: dict[str, list[str]] = {
    "recall mode": ["recall", "x", "--store", "global", "--mode", CLI_BIG],
    "recall since": ["recall", "x", "--store", "global", "--since", CLI_BIG],
    "store": ["recall", "x", "--store", CLI_BIG],
    "cwd": ["recall", "x", "--cwd", CLI_BIG],
    "agent": ["agents", "status", CLI_BIG],
}


@pytest.mark.parametrize("argv", CLI.values(), ids=list(CLI))
def test_the_cli_names_a_bad_value_bounded(tmp_home: Path, argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "coffer_memory", "--home", str(tmp_home), *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "COFFER_HOME": str(tmp_home)},
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert_small_and_clean(done.stdout + done.stderr)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"

"""``coffer-mcp`` on stdio at the end of its input: every request read is answered before it exits.

The real ``coffer-mcp`` console script in a subprocess, on both paths (the fast handshake and the
plain one). The slow call is slow for a real reason: a ``coffer__remember`` of the global store
waits for the store's write lock (an ``flock``), which this test process holds.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import test_mcp_handshake as handshake
from test_mcp_handshake import INITIALIZED, PROBE_TIMEOUT, Peer, initialize, remember

from coffer_memory._store.lock import store_lock
from coffer_memory._store.paths import lock_path
from coffer_memory_mcp.cli import DRAIN_SECONDS

recorded = handshake.recorded  # the fixture: the snapshot each peer's home gets when needed


@pytest.mark.parametrize("path", ["fast", "plain"])
def test_a_call_running_past_the_drain_is_answered_with_an_error(
    tmp_path: Path, recorded: Path | None, path: str
) -> None:
    """A client that closes stdin and waits got nothing for a call still running after the
    drain: the server cancelled it and exited. Now the call gets a JSON-RPC error naming the
    drain before the server lets its input go, and no second answer after."""
    env = {} if path == "fast" else {"COFFER_MCP_FAST_HANDSHAKE": "0"}
    peer = Peer(tmp_path / path, env=env, recorded=recorded)
    try:
        with store_lock(lock_path(peer.home, "global")):
            for message in (initialize(), INITIALIZED, remember(1, "Written after the client left.")):
                peer.send(message)
            peer.release()
            assert peer.answer()["id"] == 0
            assert peer.proc.stdin is not None
            peer.proc.stdin.close()
            answer = peer.answer()  # within PROBE_TIMEOUT, which is well past the drain
            assert answer["id"] == 1, answer
            error = answer["error"]
            assert error["code"] == -32603
            assert "cancelled" in error["message"] and f"{DRAIN_SECONDS:g} s" in error["message"]
        assert peer.proc.wait(PROBE_TIMEOUT) == 0
        assert list(iter(peer.lines.get, b"")) == []  # the call, ended after the error, is not answered again
        assert "Traceback" not in peer.stderr(), peer.stderr()
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()
            peer.proc.wait()


@pytest.mark.parametrize("path", ["fast", "plain"])
def test_two_calls_under_one_id_are_each_answered_at_the_end_of_input(
    tmp_path: Path, recorded: Path | None, path: str
) -> None:
    """A client that sends two calls under one id and closes stdin got one answer: the drain
    counted the id once, stopped waiting at the first answer, and the second call was cancelled
    unanswered. The MCP SDK runs and answers both (its in-flight table is keyed by id, a reused
    one overwritten, each call answered under it), and so does coffer-mcp now, on both paths."""
    env = {} if path == "fast" else {"COFFER_MCP_FAST_HANDSHAKE": "0"}
    peer = Peer(tmp_path / path, env=env, recorded=recorded)
    try:
        with store_lock(lock_path(peer.home, "global")):  # both calls wait for it
            peer.send(initialize())
            peer.send(INITIALIZED)
            peer.send(remember(1, "The first call under id one."))
            peer.send(remember(1, "The second call under id one."))
            peer.release()
            assert peer.answer()["id"] == 0
            assert peer.proc.stdin is not None
            peer.proc.stdin.close()
            deadline = time.monotonic() + PROBE_TIMEOUT
            while "end of input with " not in peer.stderr():  # the drain began, both calls waiting
                assert time.monotonic() < deadline and peer.proc.poll() is None, peer.stderr()
                time.sleep(0.01)
        answers = [peer.answer(), peer.answer()]
        assert peer.proc.wait(PROBE_TIMEOUT) == 0
        assert list(iter(peer.lines.get, b"")) == []
        assert [a["id"] for a in answers] == [1, 1]
        texts = sorted(a["result"]["structuredContent"]["title"] for a in answers)
        assert texts == ["The first call under id one.", "The second call under id one."], answers
        assert "Traceback" not in peer.stderr(), peer.stderr()
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()
            peer.proc.wait()

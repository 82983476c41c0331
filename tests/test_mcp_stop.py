"""``coffer-mcp`` on stdio ends promptly on one SIGINT or SIGTERM, with its client still connected.

Each test runs the real console script with a pipe for stdin that stays open (an agent that is
still running, or a terminal), completes the MCP handshake, then signals it. The bound is a hang
check, not a measurement. The plain path (no handshake snapshot, ``COFFER_MCP_FAST_HANDSHAKE=0``)
is where one Ctrl-C used to leave the process waiting until stdin was closed.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from tests.test_mcp_handshake import INITIALIZED, Peer, initialize, recorded, remember

__all__ = ["recorded"]  # the fixture: a snapshot that fits the installed SDK, for the fast path

PLAIN = {"COFFER_MCP_FAST_HANDSHAKE": "0"}
FACT = "The staging database is reset every Monday."


def _served(tmp_path: Path, name: str, env: dict[str, str], recorded: Path | None) -> tuple[Peer, str]:
    """A coffer-mcp past its handshake and one ``remember`` answered by its SDK (the fast path has
    handed the wire over), stdin kept open; the id of the fact written."""
    peer = Peer(tmp_path / name, env=env, recorded=recorded)
    peer.release()
    for message in (initialize(), INITIALIZED, remember(1, FACT)):
        peer.send(message)
    answers = peer.answers(2)
    assert sorted(answers) == [0, 1], answers
    assert not answers[1]["result"]["isError"], answers[1]
    return peer, answers[1]["result"]["structuredContent"]["id"]


@pytest.mark.parametrize("path", ["plain", "fast"])
@pytest.mark.parametrize(("sig", "statuses"), [(signal.SIGINT, {0}), (signal.SIGTERM, {-signal.SIGTERM})])
def test_one_signal_ends_coffer_mcp_with_its_stdin_open(
    tmp_path: Path, path: str, sig: signal.Signals, statuses: set[int], recorded: Path | None
) -> None:
    """Ctrl-C in a terminal, or an agent stopping its server, with the client's end of stdin open.

    Before, on the plain path, the SDK's stdio transport read stdin in a worker thread that a
    cancelled run waits for: after one SIGINT the process ran on until the client closed stdin.
    SIGTERM ends it at the signal's default (status -15). Either way the ``remember`` answered as
    done before is in the home afterwards."""
    peer, fact_id = _served(tmp_path, path, PLAIN if path == "plain" else {}, recorded)
    try:
        peer.proc.send_signal(sig)
        assert peer.ended() in statuses, peer.stderr()
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()
    log = peer.stderr()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log
    with MemoryService(peer.home) as service:
        assert service.get_fact(fact_id, scope="global").fact.body.strip() == FACT

"""``coffer-mcp`` answers the MCP handshake before the SDK is imported, then hands the wire over.

Every test runs the real ``coffer-mcp`` console script in a subprocess and speaks JSON-RPC lines to
it. The order of events is observed, never timed: with ``COFFER_MCP_DEBUG_HANDSHAKE=1`` the server
logs each answer it gives before the SDK (and whether ``mcp`` is imported yet) to stderr, and
``COFFER_MCP_DEBUG_HOLD_SDK`` keeps the SDK import waiting until the test creates a file.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from coffer_memory import MemoryService
from coffer_memory_mcp import _handshake

SCRIPTS = Path(sys.executable).parent
PROBE_TIMEOUT = 120  # a bound for a hung server, not a measurement


def initialize(request_id: Any = 0, version: str = "2025-06-18") -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def remember(request_id: Any, text: str) -> dict[str, Any]:
    arguments = {"text": text, "scope": "global"}
    return request(request_id, "tools/call", {"name": "coffer__remember", "arguments": arguments})


class Peer:
    """The ``coffer-mcp`` console script over stdio, with its stderr kept in a file."""

    def __init__(
        self,
        tmp: Path,
        *,
        home: Path | None = None,
        env: dict[str, str] | None = None,
        recorded: Path | None = None,
    ) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.hold = tmp / "release-the-sdk"
        self.err_path = tmp / "stderr.txt"
        self.home = home or tmp / "home"
        if recorded is not None and home is None:  # what the home's first coffer-mcp would record
            cached = _handshake.cache_file(str(self.home))
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_bytes(recorded.read_bytes())
        full = {
            **os.environ,
            "COFFER_HOME": str(self.home),
            "COFFER_MCP_DEBUG_HANDSHAKE": "1",
            "COFFER_MCP_DEBUG_HOLD_SDK": str(self.hold),
            **(env or {}),
        }
        with self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(
                [str(SCRIPTS / "coffer-mcp")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=full,
            )
        # A thread reads stdout: select() cannot see lines already in the file object's buffer.
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def release(self) -> None:
        """Let the SDK import start."""
        self.hold.write_text("go")

    def send(self, message: dict[str, Any] | str) -> None:
        assert self.proc.stdin is not None
        line = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=PROBE_TIMEOUT)
        except queue.Empty:
            raise AssertionError(f"no answer; stderr: {self.stderr()}") from None
        assert line, f"the server closed stdout; stderr: {self.stderr()}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def answers(self, count: int) -> dict[Any, dict[str, Any]]:
        """The next ``count`` answers by id (their order among themselves is the server's)."""
        got = [self.answer() for _ in range(count)]
        return {a["id"]: a for a in got}

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def ended(self) -> int:
        """The exit status, waited for at most ``PROBE_TIMEOUT``; a server still running then fails
        the test with what it said (which path, how far it got) and where each of its threads
        waits (``/proc``'s wchan), not with a bare ``TimeoutExpired``."""
        try:
            return self.proc.wait(PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            tasks = Path(f"/proc/{self.proc.pid}/task")
            waits = [
                f"{t.name}: {(t / 'wchan').read_text(errors='replace')}" for t in sorted(tasks.iterdir())
            ]
            raise AssertionError(
                f"coffer-mcp still runs {PROBE_TIMEOUT} s on; its threads wait in {waits}; "
                f"stderr: {self.stderr()}"
            ) from None

    def close(self) -> int:
        """Close stdin (EOF) and wait for the server to exit."""
        self.release()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(PROBE_TIMEOUT)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """None when the packaged snapshot fits the installed packages; else the snapshot coffer-mcp
    records for them (pip chose other versions than the snapshot's), which each peer's home gets."""
    if _handshake.load_snapshot()[0] is not None:
        return None
    return _handshake.record_snapshot(str(tmp_path_factory.mktemp("recorded")))


@pytest.fixture
def peers(tmp_path: Path, recorded: Path | None) -> Any:
    started: list[Peer] = []

    def start(name: str = "peer", **kwargs: Any) -> Peer:
        peer = Peer(tmp_path / name, recorded=recorded, **kwargs)
        started.append(peer)
        return peer

    yield start
    for peer in started:
        if peer.proc.poll() is None:
            peer.proc.kill()
            peer.proc.wait()


def snapshot_result(peer: Peer, version: str, method: str) -> Any:
    """The snapshot's answer that ``peer`` serves: the packaged one, or its home's recorded one."""
    snapshot, reason = _handshake.load_snapshot(cached=_handshake.cache_file(str(peer.home)))
    assert snapshot is not None, reason
    return snapshot.result(snapshot.negotiate(version), method)


def handshake_by_the_sdk(peer: Peer, *before: str) -> str:
    """Run a handshake (after the raw lines ``before``) that the SDK must answer; the server's stderr."""
    for line in before:
        peer.send(line)
    peer.send(initialize())
    peer.send(INITIALIZED)
    peer.send(request(1, "tools/list"))
    peer.release()
    answers = peer.answers(2)
    assert answers[0]["result"] == snapshot_result(peer, "2025-06-18", "initialize")
    assert answers[1]["result"] == snapshot_result(peer, "2025-06-18", "tools/list")
    assert peer.close() == 0
    log = peer.stderr()
    assert "before the SDK" not in log
    return log


def test_handshake_and_tools_list_are_answered_before_the_sdk_is_imported(peers: Any) -> None:
    peer = peers()
    peer.send(initialize())
    init = peer.answer()
    # A client may ask for the tools before it says it is initialized; the SDK serves that too.
    peer.send(request(1, "tools/list"))
    peer.send(INITIALIZED)
    peer.send(remember(2, "The deploy script lives in ops/deploy.sh."))
    peer.send(request(3, "ping"))
    first = peer.answers(2)
    assert sorted(first) == [1, 3]  # the tools/call waits for the SDK, which has not started importing
    log = peer.stderr()
    assert "the SDK server is ready" not in log
    for method, request_id in (("initialize", 0), ("tools/list", 1), ("ping", 3)):
        assert f"answered {method} id={request_id} before the SDK (mcp imported: False)" in log
    assert init["result"] == snapshot_result(peer, "2025-06-18", "initialize")
    assert [t["name"] for t in first[1]["result"]["tools"]] == [
        "coffer__recall",
        "coffer__remember",
        "coffer__list_memory",
        "coffer__resume",
        "coffer__handoff",
    ]
    peer.release()
    called = peer.answer()
    assert called["id"] == 2 and called["result"]["isError"] is False, called
    assert peer.close() == 0
    with MemoryService(peer.home) as svc:
        assert [f.fact.body.strip() for f in svc.list_facts(store="global").items] == [
            "The deploy script lives in ops/deploy.sh."
        ]
    assert "Traceback" not in peer.stderr()


@pytest.mark.parametrize("version", ["2024-11-05", "2025-11-25", "2026-07-28", "1999-12-31"])
def test_fast_and_plain_paths_answer_alike(peers: Any, version: str) -> None:
    fast = peers("fast")
    plain = peers("plain", env={"COFFER_MCP_FAST_HANDSHAKE": "0"})
    got = []
    for peer in (fast, plain):
        peer.release()
        peer.send(initialize(7, version))
        peer.send(INITIALIZED)
        peer.send(request(8, "tools/list", {}))
        peer.send(request(9, "ping"))
        # Claude Code asks for every list at once and waits for all of them.
        for offset, method in enumerate(("prompts/list", "resources/list", "resources/templates/list")):
            peer.send(request(10 + offset, method))
        got.append([peer.answer() for _ in range(6)])
        assert peer.close() == 0
    assert got[0] == got[1]  # as JSON: same ids, results and order
    assert "answered tools/list id=8 before the SDK" in fast.stderr()
    assert "answered resources/templates/list id=12 before the SDK" in fast.stderr()
    assert "plain path: COFFER_MCP_FAST_HANDSHAKE=0" in plain.stderr()
    assert "before the SDK" not in plain.stderr()


def test_a_reused_id_and_odd_ids_reach_the_right_answers(peers: Any) -> None:
    peer = peers()
    peer.send(initialize("same"))
    assert peer.answer()["id"] == "same"
    peer.send(INITIALIZED)
    big = 2**53 + 1
    peer.send(request(big, "tools/list"))
    peer.send(request(-1, "ping"))
    assert sorted(peer.answers(2), key=str) == [-1, big]
    # Reusing the initialize's id: the SDK's answer to the replayed initialize must not be taken for it.
    peer.send(remember("same", "Release branches are cut on Mondays."))
    peer.send(request("", "prompts/get", {"name": "resume"}))
    peer.release()
    later = peer.answers(2)
    assert later["same"]["result"]["isError"] is False, later
    assert "messages" in later[""]["result"], later
    assert peer.close() == 0


def other_sdk(tmp_path: Path) -> Path:
    """A folder of metadata saying another SDK is installed, for PYTHONPATH (ahead of the real one on
    sys.path): what a user whose pip chose other versions than the packaged snapshot's has."""
    site = tmp_path / "site"
    (site / "mcp-9.9.9.dist-info").mkdir(parents=True)
    (site / "mcp-9.9.9.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mcp\nVersion: 9.9.9\n"
    )
    return site


def test_a_snapshot_for_another_sdk_version_takes_the_plain_path_and_records_one(
    peers: Any, tmp_path: Path
) -> None:
    site = other_sdk(tmp_path)
    home = tmp_path / "home"
    cached = _handshake.cache_file(str(home))
    first = peers("first", home=home, env={"PYTHONPATH": str(site)})
    first.send(initialize())
    first.send(INITIALIZED)
    first.send(request(1, "tools/list"))
    first.release()
    answers = first.answers(2)
    # The plain path records this SDK's answers for the next start (on a thread, while it serves).
    # Wait for its log line, not the file: the file is renamed in before the line is written, and
    # an EOF in between ends the server before it says so (seen once under a load of 12).
    recorded = f"recorded the handshake in {cached}"
    deadline = time.monotonic() + PROBE_TIMEOUT
    while recorded not in first.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.close() == 0
    log = first.stderr()
    assert (
        f"plain path: handshake.json is for mcp {importlib.metadata.version('mcp')} (installed: 9.9.9)" in log
    )
    assert recorded in log
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600
    assert json.loads(cached.read_text())["packages"]["mcp"] == "9.9.9"

    second = peers("second", home=home, env={"PYTHONPATH": str(site)})
    second.send(initialize())
    assert second.answer()["result"] == answers[0]["result"]  # answered before the SDK is released
    second.send(request(1, "tools/list"))
    assert second.answer()["result"] == answers[1]["result"]
    assert second.close() == 0
    assert "fast path: handshake.json is for mcp" in second.stderr()
    assert "answered initialize id=0 before the SDK (mcp imported: False)" in second.stderr()


def test_installed_versions_are_what_importlib_metadata_says() -> None:
    found = _handshake.installed_versions()
    assert found == {name: importlib.metadata.version(name) for name in _handshake.KEY_DISTRIBUTIONS}


def test_a_malformed_first_line_leaves_the_whole_session_to_the_sdk(peers: Any) -> None:
    # The line that is not JSON is answered at once, Parse error with id null (JSON-RPC 2.0; MCP
    # lets an error go without an id it could not read): it was left unanswered before, as the SDK
    # leaves it, so this test expected the silence. The handshake after it is still the SDK's.
    peer = peers()
    peer.send("this is not json")
    parse_error = peer.answer()
    assert parse_error["id"] is None and parse_error["error"]["code"] == -32700, parse_error
    assert "the SDK server is ready" not in peer.stderr()  # answered while the SDK is held
    handshake_by_the_sdk(peer)


LINES_THE_SDK_DROPS = (
    '[{"jsonrpc": "2.0", "id": 11, "method": "ping"}]',  # a batch
    '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',  # an id no client could match
    '{"jsonrpc": "2.0", "id": 13, "method": "ping"',  # not JSON (cut short)
    '{"jsonrpc": "1.0", "id": 14, "method": "ping"}',  # JSON, not JSON-RPC
)


@pytest.mark.parametrize("path", ["fast", "plain"])
def test_lines_sent_just_before_eof_are_all_answered_before_exit(peers: Any, path: str) -> None:
    """Every request read gets its answer (or its error) before coffer-mcp exits on EOF. The
    client writes a batch and other lines the SDK refuses right after its handshake, and closes
    stdin at once, while the SDK is still being imported: the fast path exited without answering
    them (only a line it read as a plain request kept it for the SDK)."""
    peer = peers(path, env={} if path == "fast" else {"COFFER_MCP_FAST_HANDSHAKE": "0"})
    for message in (initialize(), INITIALIZED, *LINES_THE_SDK_DROPS):
        peer.send(message)
    assert peer.close() == 0  # closes stdin, then lets the SDK import start
    answers = [json.loads(line) for line in iter(peer.lines.get, b"")]
    assert "Traceback" not in peer.stderr(), peer.stderr()
    # Answers are matched by id, not order: on the plain path the wrapper's own errors for lines
    # the SDK would drop may go out before the SDK's answer to initialize (seen under load).
    init = [a for a in answers if isinstance(a, dict) and a.get("id") == 0]
    assert len(init) == 1 and "result" in init[0], answers
    rest = [a for a in answers if a is not init[0]]
    batch = [a for a in rest if isinstance(a, list)]
    assert [[(e["id"], e["error"]["code"]) for e in b] for b in batch] == [[(11, -32600)]], answers
    single = sorted(((a["id"], a["error"]["code"]) for a in rest if isinstance(a, dict)), key=str)
    assert single == [(14, -32600), (None, -32600), (None, -32700)], answers


def test_eof_while_the_sdk_imports_ends_as_the_plain_path_does(peers: Any) -> None:
    outputs = []
    for name, env in (("fast", {}), ("plain", {"COFFER_MCP_FAST_HANDSHAKE": "0"})):
        peer = peers(name, env=env)
        for message in (initialize(), INITIALIZED, remember(1, "Sent just before the end of stdin.")):
            peer.send(message)
        assert peer.proc.stdin is not None
        peer.proc.stdin.close()  # EOF before the SDK import may even start
        peer.release()
        assert peer.proc.wait(PROBE_TIMEOUT) == 0
        outputs.append(list(iter(peer.lines.get, b"")))
        assert "Traceback" not in peer.stderr(), peer.stderr()
        assert ("handing over to the SDK" in peer.stderr()) == (name == "fast")
    # Both answer the call still in flight before they exit (coffer-mcp drains at EOF); only the
    # new fact's id and path differ between the two homes.
    answered = [[json.loads(line) for line in output] for output in outputs]
    for answers in answered:
        assert [a["id"] for a in answers] == [0, 1]
        assert not answers[1]["result"]["isError"]
    assert answered[0][0] == answered[1][0]


def test_ctrl_c_while_the_sdk_imports_ends_without_a_traceback(peers: Any) -> None:
    """Ctrl-C in the terminal of ``claude -p`` / ``codex exec`` / ``opencode run`` sends SIGINT to
    their MCP servers too. Before, one that came while the SDK was being imported (held here)
    left a KeyboardInterrupt traceback in the agent's MCP log."""
    peer = peers()
    for message in (initialize(), INITIALIZED, remember(1, "Interrupted before the SDK was ready.")):
        peer.send(message)
    assert sorted(peer.answers(1)) == [0]  # the handshake was answered; the call waits for the SDK
    peer.proc.send_signal(signal.SIGINT)
    assert peer.ended() == 130, peer.stderr()
    assert "Traceback" not in peer.stderr() and "KeyboardInterrupt" not in peer.stderr(), peer.stderr()


def test_ctrl_c_once_the_sdk_serves_ends_the_server(peers: Any) -> None:
    """Ctrl-C after the wire was handed to the SDK, with the client still connected (its stdin
    open). Before, the SDK's run ended but coffer-mcp did not: the thread that waited for the
    client's next line (a worker thread, which the interpreter waits for at exit) waited on, until
    the client closed stdin. It ends at once, with the SDK server's status 0 (docs/mcp.md)."""
    peer = peers()
    peer.release()
    for message in (initialize(), INITIALIZED, remember(1, "Interrupted while the SDK served.")):
        peer.send(message)
    assert sorted(peer.answers(2)) == [0, 1]
    assert "handing over to the SDK" in peer.stderr()
    peer.proc.send_signal(signal.SIGINT)
    assert peer.ended() == 0, peer.stderr()
    assert "Traceback" not in peer.stderr() and "KeyboardInterrupt" not in peer.stderr(), peer.stderr()


def test_a_client_that_closed_our_stdout_ends_the_server_quietly(
    tmp_path: Path, recorded: Path | None
) -> None:
    """An agent that quits (or is killed) while a call is being answered closes the pipe the server
    writes to. Before, both paths ended with status 1 and a BrokenPipeError traceback."""
    for name, env in (("fast", {}), ("plain", {"COFFER_MCP_FAST_HANDSHAKE": "0"})):
        home = tmp_path / name
        if recorded is not None:
            cached = _handshake.cache_file(str(home))
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_bytes(recorded.read_bytes())
        err = tmp_path / f"{name}.err"
        with err.open("wb") as err_file:
            proc = subprocess.Popen(
                [str(SCRIPTS / "coffer-mcp")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err_file,
                env={**os.environ, "COFFER_HOME": str(home), **env},
            )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(initialize()).encode() + b"\n" + json.dumps(INITIALIZED).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        proc.stdout.close()  # the agent is gone; its end of the pipe with it
        for n in range(1, 4):
            call = request(n, "tools/call", {"name": "coffer__recall", "arguments": {"query": "x"}})
            proc.stdin.write(json.dumps(call).encode() + b"\n")
        proc.stdin.close()
        assert proc.wait(PROBE_TIMEOUT) == 0, err.read_text()
        assert "Traceback" not in err.read_text(), err.read_text()


def test_eof_with_every_request_answered_exits_before_the_sdk(peers: Any) -> None:
    """A probe (``coffer agents status``) asks for the tools, closes stdin and waits for the exit:
    with nothing left to answer the server does not first import the SDK (held here, never let go)."""
    peer = peers()
    for message in (initialize(), INITIALIZED, request(1, "tools/list")):
        peer.send(message)
    assert sorted(peer.answers(2)) == [0, 1]
    assert peer.proc.stdin is not None
    peer.proc.stdin.close()
    assert peer.proc.wait(PROBE_TIMEOUT) == 0
    assert "exiting before the SDK" in peer.stderr() and "the SDK server is ready" not in peer.stderr()


def test_a_server_that_cannot_start_answers_every_request_with_its_error(peers: Any, tmp_path: Path) -> None:
    if _handshake.load_snapshot()[0] is None:
        pytest.skip(
            "the packaged snapshot is for other package versions, and a home that is a file holds no recorded one"
        )
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    peer = peers(home=a_file)
    peer.send(initialize())
    assert peer.answer()["result"] == snapshot_result(peer, "2025-06-18", "initialize")
    peer.send(INITIALIZED)
    peer.send(remember(1, "never written"))
    peer.send(request(2, "prompts/get", {"name": "resume"}))
    peer.release()
    answers = peer.answers(2)
    says = f"coffer home {a_file} cannot be used: {a_file} is not a folder"
    tool = answers[1]["result"]
    assert tool["isError"] is True and tool["content"][0]["text"] == f"INVALID_INPUT: {says}"
    assert tool["structuredContent"]["error"]["code"] == "INVALID_INPUT"
    assert answers[2]["error"]["message"] == f"INVALID_INPUT: {says}"
    assert answers[2]["error"]["data"]["error"]["message"] == says
    peer.send(request(3, "tools/list"))  # the snapshot still answers what it can
    assert peer.answer()["id"] == 3
    peer.send(remember(4, "still not written"))
    assert peer.answer()["result"]["isError"] is True
    assert peer.close() == 0
    assert f"coffer-mcp: INVALID_INPUT: {says}" in peer.stderr()


def test_the_committed_snapshot_is_what_the_installed_sdk_answers(tmp_path: Path) -> None:
    # A change to coffer's tools, resources or instructions must come with a new snapshot. Where
    # pip chose other versions than the snapshot's, coffer-mcp records its own (tested above).
    snapshot, reason = _handshake.load_snapshot()
    if snapshot is None:
        pytest.skip(f"{reason}: coffer-mcp records a snapshot of its own for these versions")
    fresh = _handshake.render(_handshake.generate(str(tmp_path / "home")))
    assert _handshake.SNAPSHOT_PATH.read_text(encoding="utf-8") == fresh, (
        "coffer_memory_mcp/handshake.json is stale: run .venv/bin/python -m coffer_memory_mcp._handshake"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto may probe with server/discover first
async def test_the_official_client_over_stdio(tmp_path: Path, anyio_backend: str, mode: str) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=str(SCRIPTS / "coffer-mcp"), env={"COFFER_HOME": str(tmp_path / "home")}
    )
    async with Client(params, mode=mode) as client:
        tools = await client.list_tools()
        assert "coffer__remember" in [t.name for t in tools.tools]
        result = await client.call_tool("coffer__remember", {"text": "Tabs, not spaces.", "scope": "global"})
        assert not result.is_error
        found = await client.call_tool("coffer__recall", {"query": "tabs", "cwd": str(tmp_path)})
        assert not found.is_error and "Tabs, not spaces." in str(found.structured_content)


def test_a_home_cache_is_one_private_file_of_the_home(tmp_path: Path) -> None:
    from coffer_memory import InvalidInput, write_home_cache

    path = write_home_cache(tmp_path / "home", "x.json", b"{}")
    assert path == tmp_path / "home" / "cache" / "x.json" and path.read_bytes() == b"{}"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for name in ("", ".", "..", "../x", "a/b"):
        with pytest.raises(InvalidInput) as refused:
            write_home_cache(tmp_path / "home", name, b"")
        assert refused.value.code == "INVALID_INPUT" and refused.value.field == "name"
    assert sorted(p.name for p in (tmp_path / "home" / "cache").iterdir()) == ["x.json"]


@pytest.mark.parametrize(
    "damage",
    ["packages: a list", "results: none", "results: a list", "a method missing", "counter_offer: unknown"],
)
def test_a_recorded_snapshot_of_the_wrong_shape_takes_the_plain_path_and_is_recorded_anew(
    peers: Any, tmp_path: Path, damage: str
) -> None:
    """Valid JSON for the installed versions but not a snapshot (another coffer's format after a
    downgrade, a hand edit): coffer-mcp crashed at every start until the file was deleted."""
    site = other_sdk(tmp_path)
    home = tmp_path / "home"
    cached = _handshake.cache_file(str(home))
    cached.parent.mkdir(parents=True)
    packages = {**_handshake.installed_versions(), "mcp": "9.9.9"}
    version = "2025-06-18"
    answers = {m: {} for m in ("initialize", *_handshake.FAST_METHODS)}
    build = hashlib.sha256(_handshake.SNAPSHOT_PATH.read_bytes()).hexdigest()
    data: dict[str, Any] = {
        "packages": packages,
        "counter_offer": version,
        "results": {version: answers},
        "build": build,
    }
    if damage == "packages: a list":
        data["packages"] = sorted(packages)
    elif damage == "results: none":
        data["results"] = {}
    elif damage == "results: a list":
        data["results"] = [version]
    elif damage == "a method missing":
        del answers["tools/list"]
    else:
        data["counter_offer"] = "1999-01-01"
    cached.write_text(json.dumps(data))
    peer = peers(home=home, env={"PYTHONPATH": str(site)})
    peer.send(initialize())
    peer.send(INITIALIZED)
    peer.send(request(1, "tools/list"))
    peer.release()
    got = peer.answers(2)
    assert got[0]["result"]["protocolVersion"] == version
    assert "coffer__remember" in [t["name"] for t in got[1]["result"]["tools"]]
    deadline = time.monotonic() + PROBE_TIMEOUT
    while json.loads(cached.read_text()) == data and time.monotonic() < deadline:
        time.sleep(0.05)  # the plain path records a good snapshot over it, on a thread
    assert peer.close() == 0
    assert "plain path:" in peer.stderr() and "Traceback" not in peer.stderr(), peer.stderr()
    recorded = json.loads(cached.read_text())
    assert recorded["packages"]["mcp"] == "9.9.9"
    assert recorded["results"][version]["tools/list"] == got[1]["result"]


def test_a_recorded_snapshot_is_for_the_build_that_recorded_it(tmp_path: Path) -> None:
    """An editable install keeps its version while its tools change: a snapshot recorded before the
    change answered tools/list with the old tools at every later start. The packaged snapshot is
    regenerated with the tools, and a recorded one is used only beside the packaged one it was
    recorded with."""
    packaged = tmp_path / "handshake.json"
    data = json.loads(_handshake.SNAPSHOT_PATH.read_text(encoding="utf-8"))
    data["packages"]["mcp"] = "9.9.9"  # not the installed SDK: the recorded snapshot is consulted
    packaged.write_text(_handshake.render(data), encoding="utf-8")
    cached = _handshake.record_snapshot(str(tmp_path / "home"), packaged=packaged)
    snapshot, reason = _handshake.load_snapshot(packaged, cached=cached)
    assert snapshot is not None, reason
    data["comment"] += " (a tool changed)"
    packaged.write_text(_handshake.render(data), encoding="utf-8")
    snapshot, reason = _handshake.load_snapshot(packaged, cached=cached)
    assert snapshot is None and "recorded by another build of coffer-mcp" in reason

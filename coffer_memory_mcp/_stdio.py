"""``coffer-mcp``'s entry: on stdio, the handshake is answered before the MCP SDK is imported.

Importing the SDK takes 1-4 s (pydantic models), longer than agents wait for a server's tool list
(Codex leaves out servers not ready within 1 s). So the main thread reads the wire at once and
answers ``initialize``, ``ping`` and the ``*/list`` requests from the SDK's own recorded answers
(``_handshake``), while a thread imports the SDK and builds the server. Every other line waits.
Then the wire is handed to the SDK unchanged: it first reads the client's ``initialize`` again
(under an id of ours, whose answer is dropped) so its session knows the client, then every
waiting line in order, then the rest of the stream. Exactly one writer owns stdout at any time.
Without a snapshot that fits the installed packages, or on any other transport, ``cli.main``
runs as before (import, then serve). ``COFFER_MCP_FAST_HANDSHAKE=0`` forces that plain path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from coffer_memory._interrupt import ready

from ._args import build_parser
from ._debug import DEBUG_ENV
from ._debug import debug as _debug
from ._fds import claim_stdio as _claim_stdio
from ._handshake import FAST_METHODS, Snapshot, cache_file, load_snapshot, record_snapshot
from ._lines import EOF, LineSource, end, next_item, start_reader
from ._screen import DROPPED, screen

__all__ = ["main"]

HOLD_ENV = "COFFER_MCP_DEBUG_HOLD_SDK"
"""With DEBUG_ENV: the SDK import waits until this file exists (lets a test see the order of events)."""
OFF_ENV = "COFFER_MCP_FAST_HANDSHAKE"


def _request(line: str) -> dict[str, Any] | None:
    """The line as a JSON-RPC request (with an int or str id), or None."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # nested past the parser's depth: not a request we read
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    if not isinstance(message.get("method"), str) or isinstance(request_id, bool):
        return None
    return message if isinstance(request_id, (int, str)) else None


def _plain_params(params: Any) -> bool:
    """Params that cannot change a ``ping`` or list answer: none, ``_meta`` (an object), a null cursor."""
    if params is None:
        return True
    return (
        isinstance(params, dict)
        and set(params) <= {"_meta", "cursor"}
        and params.get("cursor") is None
        and isinstance(params.get("_meta", {}), dict)
    )


_CLIENT_TEXTS = ("title", "description", "websiteUrl")  # optional fields of clientInfo, text or null


def _writable(message: dict[str, Any]) -> bool:
    """Whether ``message`` holds no lone surrogate (``"\\ud800"``), which the SDK refuses
    (``cli.answer_to_refused`` then says so): answering it here would accept what it refuses."""
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _initialize(message: dict[str, Any] | None) -> str | None:
    """The protocol version asked for when ``message`` is an ``initialize`` the SDK accepts as is."""
    if message is None or message["method"] != "initialize":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    caps, info, version = params.get("capabilities"), params.get("clientInfo"), params.get("protocolVersion")
    if not isinstance(caps, dict) or not all(isinstance(v, dict) for v in caps.values()):
        return None
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("name", "version")):
        return None
    if "icons" in info or not all(isinstance(info.get(k), (str, type(None))) for k in _CLIENT_TEXTS):
        return None  # the SDK checks these; the rare client sending icons waits for it
    if not isinstance(params.get("_meta", {}), dict):
        return None
    return version if isinstance(version, str) else None


class _Wire:
    """stdout, written by one writer at a time (the main thread, then the SDK's writer task)."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message, separators=(",", ":")) + "\n")

    def write(self, text: str) -> None:
        with self._lock:
            self._out.write(text.encode("utf-8"))
            self._out.flush()


@dataclass
class _Session:
    """What the main thread learned before the SDK was ready."""

    snapshot: Snapshot
    wire: _Wire
    version: str | None = None  # negotiated; None until a fast initialize
    init: dict[str, Any] | None = None
    waiting: list[str] = field(default_factory=list)
    first: bool = True

    def take(self, line: str) -> None:
        """Answer ``line`` from the snapshot when it can be, else keep it for the SDK."""
        first, self.first = self.first, False
        # Not JSON, a batch, an id no client could match, a key named twice: no SDK needed.
        screened = screen(line)
        if screened is not None:
            _debug("answered (or dropped) a line the SDK would drop or misread")
            if screened != DROPPED:
                self.wire.write(screened)
            return
        message = _request(line)
        if message is not None and not _writable(message):
            message = None
        requested = _initialize(message) if first else None
        if message is not None and requested is not None:
            self.version, self.init = self.snapshot.negotiate(requested), message
            self._answer(message, "initialize")
        elif (
            message is not None
            and self.version
            and message["method"] in FAST_METHODS
            and _plain_params(message.get("params"))
        ):
            self._answer(message, message["method"])
        else:
            self.waiting.append(line)

    def _answer(self, message: dict[str, Any], method: str) -> None:
        assert self.version is not None
        result = self.snapshot.result(self.version, method)
        # Logged first: a client that has the answer has the line on stderr too.
        _debug(
            f"answered {method} id={message['id']!r} before the SDK (mcp imported: {'mcp' in sys.modules})"
        )
        self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def replay(self, replay_id: str) -> list[str]:
        """The lines the SDK reads first: the client's initialize under ``replay_id``, then the waiting."""
        if self.init is None:
            return self.waiting
        return [json.dumps({**self.init, "id": replay_id}) + "\n", *self.waiting]


def _notification(line: str) -> bool:
    """Whether ``line`` wants no answer: a blank line, or a JSON object without an id. Anything
    else may (a request the SDK refuses is answered too: ``cli.answer_to_refused``)."""
    if not line.strip():
        return True
    try:
        message = json.loads(line, parse_int=lambda digits: 0)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and "id" not in message


@dataclass
class _Built:
    service: Any = None
    server: Any = None
    error: BaseException | None = None


def _build(args: Any, events: queue.Queue[object]) -> None:
    """Import the SDK and build the server, as ``cli.main`` does; report on ``events``."""
    built = _Built()
    try:
        hold = os.environ.get(HOLD_ENV) if os.environ.get(DEBUG_ENV) == "1" else None
        while hold and not os.path.exists(hold):
            time.sleep(0.01)
        from coffer_memory import MemoryService

        from .cli import _serve_stdio  # noqa: F401  (imported here, off the main thread, for _hand_over)
        from .server import build_server

        built.service = MemoryService(args.home)
        threading.Thread(target=built.service.startup_sweep, name="coffer-startup-sweep", daemon=True).start()
        built.server = build_server(built.service)
        _debug("the SDK server is ready")
    except BaseException as exc:  # reported to every request; the process must not die silently
        built.error = exc
    events.put(built)


class _Sink:
    """The SDK's stdout: drops its answer to the replayed initialize, writes the rest to the wire."""

    def __init__(self, wire: _Wire, replay_id: str) -> None:
        self._wire = wire
        self._replay_id = replay_id

    async def write(self, text: str) -> None:
        if self._replay_id in text:
            message = json.loads(text)
            if message.get("id") == self._replay_id and "method" not in message:
                if "error" in message:  # the SDK refused what the snapshot answered: say so
                    print(
                        f"coffer-mcp: the SDK refused the client's initialize: {message['error']}",
                        file=sys.stderr,
                    )
                return
        import anyio

        await anyio.to_thread.run_sync(self._wire.write, text)

    async def flush(self) -> None:
        """Each write is flushed already."""


def _failed(session: _Session, lines: queue.Queue[object], exc: BaseException) -> int:
    """Serve without a server: the snapshot's answers, and the start-up error to every other request.

    Before ``initialize`` was answered it is what the plain path does: the error on stderr, exit 1."""
    from coffer_memory import CofferError

    if isinstance(exc, CofferError):
        code, message, details = exc.code, exc.message, dict(exc.details)
    else:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
        code, message = "INTERNAL", f"coffer-mcp could not start its MCP server: {type(exc).__name__}: {exc}"
        details = {"type": type(exc).__name__}
    print(f"coffer-mcp: {code}: {message}", file=sys.stderr, flush=True)
    if session.version is None:
        return 1
    envelope = {
        "error": {"code": code, "message": message, "details": json.loads(json.dumps(details, default=str))}
    }

    def refuse(line: str) -> None:
        screened = screen(line)  # a batch, an id no client could match: Invalid Request
        if screened is not None:
            if screened != DROPPED:
                session.wire.write(screened)
            return
        request = _request(line)
        if request is None:
            return
        if request["method"] == "tools/call":
            text = [{"type": "text", "text": f"{code}: {message}"}]
            result = {"content": text, "structuredContent": envelope, "isError": True}
            session.wire.send({"jsonrpc": "2.0", "id": request["id"], "result": result})
        else:
            error = {"code": -32603, "message": f"{code}: {message}", "data": envelope}
            session.wire.send({"jsonrpc": "2.0", "id": request["id"], "error": error})

    for line in session.waiting:
        refuse(line)
    while (item := next_item(lines)) is not EOF:
        assert isinstance(item, str)
        session.waiting = []
        session.take(item)
        for line in session.waiting:
            refuse(line)
    return 0


def _serve_fast(args: Any, snapshot: Snapshot) -> int:
    import logging

    logging.basicConfig(
        stream=sys.stderr, level=args.log_level, format="coffer-mcp %(levelname)s %(message)s"
    )
    wire_in, wire_out = _claim_stdio()
    session = _Session(snapshot, _Wire(wire_out))
    # One queue: the reader's lines and EOF, and the builder's one _Built, in the order they happened.
    lines: queue.Queue[object] = queue.Queue()
    start_reader(wire_in, lines)
    threading.Thread(target=_build, args=(args, lines), name="coffer-mcp-sdk", daemon=True).start()
    ended = False
    while not isinstance(item := next_item(lines), _Built):
        if item is EOF:
            ended = True
            if session.version is not None and all(_notification(line) for line in session.waiting):
                # The client is gone and no request of its waits for an answer: nothing is left
                # for the SDK to do. A client that waits for the exit (a probe) is not kept ~2 s.
                # (Before an initialize, a server that cannot start still says so: exit 1.)
                _debug("end of stdin with nothing to answer: exiting before the SDK")
                return 0
        else:
            assert isinstance(item, str)
            session.take(item)
    built = item
    if ended:
        lines.put(EOF)  # the SDK (or the failure loop) reads the end of the stream too
    if built.error is not None:
        return _failed(session, lines, built.error)
    return _hand_over(session, lines, built)


def _hand_over(session: _Session, lines: queue.Queue[object], built: _Built) -> int:
    import anyio

    from .cli import _serve_stdio

    replay_id = f"coffer-mcp-replay-{os.urandom(8).hex()}"
    _debug(f"handing over to the SDK ({len(session.waiting)} waiting line(s))")
    with built.service:
        source, sink = LineSource(session.replay(replay_id), lines), _Sink(session.wire, replay_id)
        try:
            anyio.run(_serve_stdio, built.server, source, sink)
        except KeyboardInterrupt:  # Ctrl-C once the SDK serves: its server's end, status 0
            pass
        finally:
            end(lines)  # lets go of the worker thread waiting for the client's next line
    return 0


def _record(home: str | None) -> None:
    try:
        _debug(f"recorded the handshake in {record_snapshot(home)}")
    except Exception as exc:  # a cache: the plain path serves on either way
        _debug(f"could not record the handshake: {exc!r}")


MISSING_SDK = (
    "coffer-mcp: No module named 'mcp': the MCP server runs on the MCP SDK, the [mcp] extra, "
    "which is not installed in this Python: pip install 'coffer-memory[mcp]'"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coffer-mcp``: on stdio with a fitting snapshot, the handshake before the SDK import."""
    if importlib.util.find_spec("mcp") is None:  # a plain install: one line, before any handshake
        build_parser().parse_args(argv)  # --help and bad arguments still answer as usual
        print(MISSING_SDK, file=sys.stderr)
        return 1
    try:
        ready()  # from here a Ctrl-C is the KeyboardInterrupt below (before, _coffer_scripts' 130)
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C in the terminal of `claude -p`, `codex exec` or `opencode run` reaches their MCP
        # servers too (one process group): end as the shell expects, without a traceback in the
        # agent's MCP log, also while the SDK is still being imported.
        return 130
    except BaseException as exc:
        if not _client_gone(exc):
            raise
        # The agent closed its end of our stdout (it quit, or was killed, while we answered):
        # nobody is left to answer. Writes are atomic, so nothing is half done; end quietly.
        _debug(f"the client closed stdout: {exc!r}")
        return 0


def _client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is only broken pipes (the SDK's task group wraps them in groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_client_gone(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.transport != "stdio" or os.environ.get(OFF_ENV) == "0":
        reason = "not stdio" if args.transport != "stdio" else f"{OFF_ENV}=0"
    else:
        snapshot, reason = load_snapshot(cached=cache_file(args.home))
        if snapshot is not None:
            _debug(f"fast path: {reason}")
            return _serve_fast(args, snapshot)
        # The next start is fast: record what this SDK answers while the plain path serves.
        threading.Thread(target=_record, args=(args.home,), name="coffer-mcp-record", daemon=True).start()
    _debug(f"plain path: {reason}")
    from .cli import main as plain

    return plain(argv)


if __name__ == "__main__":
    sys.exit(main())

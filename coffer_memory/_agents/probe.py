"""Start an MCP server command the way an agent does, and ask it ``initialize`` + ``tools/list``.

``agents status`` and ``doctor`` use it on the command actually registered in an agent's config
(with that entry's environment), so "MCP server: yes" means the server answers, not only that an
entry exists. The client is a few lines of stdlib JSON-RPC over the MCP stdio transport
(newline-delimited JSON): the core never imports the MCP SDK.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import selectors
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from .._jsontext import loads as json_loads
from ..vocabulary import MCP_PROBE_TIMEOUT_SECONDS

DEFAULT_TIMEOUT_SECONDS = MCP_PROBE_TIMEOUT_SECONDS
PROTOCOL_VERSION = "2025-06-18"
"""What the probe asks for; a server that speaks another revision answers with its own."""
STDERR_TAIL_LINES = 3
MCP_EXTRA_COMMAND = "pip install 'coffer-memory[mcp]'"
"""What installs the MCP SDK that ``coffer-mcp`` runs on (an extra since issue #15 item 8)."""
MISSING_SDK_HINT = f"install it in that command's environment: {MCP_EXTRA_COMMAND}"

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "MCP_EXTRA_COMMAND", "McpCheck", "check_mcp_server", "mcp_sdk_problem"]


def mcp_sdk_problem() -> str | None:
    """Why ``coffer-mcp`` cannot start in this Python (``None`` when the MCP SDK 2.x is there).

    Reads the import system and the installed metadata only: the SDK itself is not imported
    (that takes seconds). ``coffer-mcp`` is installed next to this interpreter, so this is the
    environment the server an install registers would run in.
    """
    try:
        found = importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):  # a broken or blocked package: as good as missing
        found = False
    if not found:
        return "the MCP SDK (the mcp package) is not installed in this Python"
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return None  # importable without metadata (a source checkout on the path): let it try
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) != 2:
        return f"coffer-mcp needs the MCP SDK 2.x, and mcp {version} is installed in this Python"
    return None


@attrs.frozen
class McpCheck:
    """What happened when an MCP server command was started and asked for its tools."""

    command: tuple[str, ...]
    ok: bool
    problem: str | None = None
    """One line saying what is wrong (``None`` when ``ok``)."""
    detail: str | None = None
    """The last lines the server wrote to stderr, when it failed."""
    server: str | None = None
    """The server's ``serverInfo``: ``name version``."""
    tools: tuple[str, ...] = ()
    seconds: float = 0.0
    """From start to the ``tools/list`` answer (or to the failure)."""

    def summary(self) -> str:
        """One line for a terminal."""
        if self.ok:
            return (
                f"answers ({self.server or 'unnamed server'}, {len(self.tools)} tools, {self.seconds:.1f} s)"
            )
        return f"fails: {self.problem}" + (f" [{self.detail}]" if self.detail else "")


class _Failed(Exception):
    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class _Session:
    """One started server: write requests, read answers until a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes], deadline: float) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin: IO[bytes] = proc.stdin
        self.stdout: IO[bytes] = proc.stdout
        self.deadline = deadline
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.stdout, selectors.EVENT_READ)

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.stdin.write(json.dumps(message).encode() + b"\n")
            self.stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise _Failed(self._exited("before it read the request")) from exc

    def _exited(self, when: str) -> str:
        code = self.proc.wait(timeout=5)
        return f"the server exited with status {code} {when}"

    def _line(self, waiting_for: str) -> bytes:
        while b"\n" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise _Failed(
                    f"no answer to {waiting_for} within the timeout (the server hangs or starts too slowly)"
                )
            if not self.selector.select(timeout=left):
                continue
            chunk = os.read(self.stdout.fileno(), 65536)
            if not chunk:
                raise _Failed(self._exited(f"before answering {waiting_for}"))
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def answer(self, request_id: int, method: str) -> dict[str, Any]:
        """The result of request ``request_id`` (notifications and other messages are skipped)."""
        while True:
            line = self._line(method)
            if not line.strip():
                continue
            try:
                message = json_loads(line)
            except ValueError:
                raise _Failed(
                    f"the server wrote something that is not JSON-RPC to stdout: {line[:120]!r}"
                ) from None
            if not isinstance(message, dict) or message.get("id") != request_id:
                continue
            if "error" in message:
                error = message["error"] if isinstance(message["error"], dict) else {}
                raise _Failed(f"{method} failed: {error.get('message', message['error'])}")
            result = message.get("result")
            return result if isinstance(result, dict) else {}


def _stderr_tail(handle: IO[bytes]) -> str | None:
    handle.seek(0)
    lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    return " | ".join(lines[-STDERR_TAIL_LINES:]) or None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close stdin (the stdio way to say goodbye), then end the server's process group."""
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait(timeout=5)


def check_mcp_server(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
    cwd: Path | None = None,
) -> McpCheck:
    """Start ``argv`` (with ``env`` added to this process's environment, as agents do), run MCP
    ``initialize`` and ``tools/list`` within ``timeout`` seconds, and stop it.

    Never raises for a broken server: every failure is an ``McpCheck`` with ``ok=False`` and a
    one-line ``problem`` (command missing, not executable, exited, hung, answered an error).
    """
    command = tuple(argv)
    started = time.monotonic()

    def failed(problem: str, detail: str | None = None) -> McpCheck:
        return McpCheck(command, ok=False, problem=problem, detail=detail, seconds=time.monotonic() - started)

    if not command:
        return failed("the registered command is empty")
    with tempfile.TemporaryFile() as stderr:
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            return failed(
                f"{command[0]} does not exist (reinstall coffer-memory, then `coffer agents install`)"
            )
        except PermissionError:
            return failed(f"{command[0]} is not executable")
        except OSError as exc:
            return failed(f"{command[0]} cannot be started ({exc.strerror or exc})")
        session = _Session(proc, started + timeout)
        try:
            session.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": PROTOCOL_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "coffer-check", "version": "1"},
                    },
                }
            )
            info = session.answer(1, "initialize").get("serverInfo") or {}
            session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            session.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
            listed = session.answer(2, "tools/list").get("tools") or []
            answered = time.monotonic() - started  # not counting the time the server takes to exit
        except _Failed as exc:
            _stop(proc)
            detail = _stderr_tail(stderr)
            problem = exc.problem
            if detail and "No module named 'mcp" in detail:
                problem += f": the MCP SDK is missing there ({MISSING_SDK_HINT})"
            return failed(problem, detail)
        finally:
            session.selector.close()
        _stop(proc)
    name = (
        " ".join(str(info.get(k)) for k in ("name", "version") if info.get(k))
        if isinstance(info, dict)
        else ""
    )
    tools = tuple(t["name"] for t in listed if isinstance(t, dict) and isinstance(t.get("name"), str))
    return McpCheck(command, ok=True, server=name or None, tools=tools, seconds=answered)

"""Servers the tests start, on ports no other process can take from them.

A port found free by binding a socket and closing it could be taken by another suite's server
before ours bound it (a test of ``coffer-api`` got a 401 from a stranger's token-guarded server).
So ``coffer-api`` and ``coffer-mcp`` start with ``--port 0``, bind a port the kernel picks and say
which on stderr (``<name>: listening on http://HOST:PORT``), and ``Served`` reads that line; a port
where nothing may listen is one this process holds bound (``closed_port``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
from typing import IO, Any

LISTENING = re.compile(r"^coffer-(?:api|mcp): listening on (http://[^/\s]+)", re.MULTILINE)
START_S = 180.0
"""A bound on a server's start-up on a loaded machine (imports take seconds), not a measurement."""


class Served:
    """A server started as ``args --port 0``; ``base`` (``http://127.0.0.1:PORT``) and ``port``
    come from the line it printed; ``stdout()`` and ``stderr()`` what it wrote so far. ``stop()``
    ends it; also a context manager."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Any = None, stdin: Any = None) -> None:
        # Files, not pipes: a pipe nobody reads fills up and stalls the server.
        self._out: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115  (closed with this object)
        self._err: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*args, "--port", "0"], env=env, cwd=cwd, stdin=stdin, stdout=self._out, stderr=self._err
        )
        deadline = time.monotonic() + START_S
        while (found := LISTENING.search(self.stderr())) is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{args[0]} did not say its port: {self.stderr()[-3000:]}")
            time.sleep(0.05)
        self.base = found.group(1)
        self.port = int(self.base.rpartition(":")[2])

    def stdout(self) -> str:
        return _read(self._out)

    def stderr(self) -> str:
        return _read(self._err)

    def stop(self, timeout: float = 60) -> int:
        """Terminate the server (if it still runs) and wait for it: its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(timeout=timeout)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read(file: IO[bytes]) -> str:
    return os.pread(file.fileno(), os.fstat(file.fileno()).st_size, 0).decode(errors="replace")


_CLOSED: list[socket.socket] = []


def closed_port() -> int:
    """A port of 127.0.0.1 where nothing listens, for as long as the test run: this process holds
    it bound and never listens (a connection is refused), and without ``SO_REUSEADDR`` no other
    socket can bind it meanwhile."""
    if not _CLOSED:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        _CLOSED.append(sock)
    port: int = _CLOSED[0].getsockname()[1]
    return port

"""``coffer-api --workers N``: each new connection goes to the worker holding the fewest.

The workers accept from one shared listening socket, and a client keeps its connection for all
its requests. When the socket turns readable every waiting worker wakes, and asyncio's event loop
accepts every queued connection at once: the first worker to run took all the connections that
had arrived together. Of 20 times 4 clients connected at once to 2 workers, 10 went 4:0 and 8 went
3:1 (docs/benchmarks.md, "REST in open loop, session 11"): one worker ran three or four clients'
recalls while the other idled.

Now each worker publishes how many connections it holds (``Tally``: one small file per worker
in the folder the workers share), and its event loop (``accept_in_turn``) takes one connection
at a time, at most one per ``STEP_S``, and none while it holds more than the least busy live
sibling: it looks again every ``STEP_S`` and leaves the socket to the others meanwhile. A
sibling that does not take the connection within ``MOST_S`` (stuck, or gone without a trace)
does not hold it up longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
from asyncio.selector_events import BaseSelectorEventLoop
from collections.abc import Callable
from pathlib import Path
from typing import Any

STEP_S = 0.001
"""How long a worker holding more connections than a sibling waits before it looks again."""
MOST_S = 0.2
"""The longest a worker leaves a waiting connection to its siblings, by default."""
WAIT_ENV = "COFFER_API_SIBLING_WAIT_S"
"""Sets ``MOST_S`` (seconds, above 0): a machine so loaded that a sibling is not scheduled within
0.2 s (a test run at load 15) lets the first worker take what the sibling would have."""
_WIDTH = 12  # a count's bytes in its file, written in place

current: Tally | None = None
"""This process's tally, once ``install`` made one (``EnvelopeProtocol`` counts into it)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's process: alive
        return True
    return True


class Tally:
    """This worker's open connections, kept in ``folder/<name>`` (``name``: its pid) for its
    siblings to read; ``alive(pid)`` says whether a sibling's process still runs."""

    def __init__(self, folder: Path, name: str | None = None, alive: Callable[[int], bool] = _alive) -> None:
        folder.mkdir(mode=0o700, exist_ok=True)
        self.folder = folder
        self.name = name or str(os.getpid())
        self.count = 0
        self._alive = alive
        self._fd = os.open(folder / self.name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        self._publish()

    def _publish(self) -> None:
        os.pwrite(self._fd, str(self.count).rjust(_WIDTH).encode(), 0)

    def opened(self) -> None:
        """A connection was made."""
        self.count += 1
        self._publish()

    def closed(self) -> None:
        """A connection was lost."""
        self.count -= 1
        self._publish()

    def excess(self) -> int:
        """How many connections this worker holds beyond the least busy live sibling (0 without one)."""
        least: int | None = None
        for entry in os.scandir(self.folder):
            if entry.name == self.name or not entry.name.isdigit():
                continue
            if not self._alive(int(entry.name)):  # a worker that died: uvicorn started another
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                continue
            try:
                count = int(Path(entry.path).read_bytes())
            except (OSError, ValueError):  # a sibling that has just created its file
                continue
            least = count if least is None else min(least, count)
        return 0 if least is None else max(0, self.count - least)

    def close(self) -> None:
        """Stop publishing: the file goes (its siblings stop counting this worker)."""
        os.close(self._fd)
        (self.folder / self.name).unlink(missing_ok=True)


def sibling_wait() -> float:
    """``MOST_S``, or the seconds ``WAIT_ENV`` gives (a value that is no number above 0 is ignored:
    the balance is a matter of speed, never a reason not to serve)."""
    with contextlib.suppress(ValueError):
        given = float(os.environ.get(WAIT_ENV, ""))
        if 0 < given < float("inf"):
            return given
    return MOST_S


def accept_in_turn(loop: asyncio.AbstractEventLoop, tally: Tally, most_s: float = MOST_S) -> bool:
    """Make ``loop`` (before its servers start) accept one connection per turn, and none while
    ``tally`` holds more than a live sibling's (for up to ``most_s``); True if it could (asyncio's
    selector loops), False otherwise (e.g. uvloop, which keeps accepting as before).

    asyncio has no public knob for this: its ``_accept_connection`` takes the count per turn as
    ``backlog``, the number ``create_server`` also gives ``listen()``, and a listen backlog of 1
    would refuse connections instead of queueing them. So this loop's method is wrapped.
    """
    accept = getattr(loop, "_accept_connection", None)
    if not isinstance(loop, BaseSelectorEventLoop) or accept is None:
        return False
    since: dict[int, float] = {}  # listening fd -> when this worker began leaving its queue to others

    def in_turn(factory: Any, sock: socket.socket, ssl: Any = None, server: Any = None, *rest: Any) -> None:
        fd = sock.fileno()
        args = (factory, sock, ssl, server, *rest)
        if tally.excess() and loop.time() - since.setdefault(fd, loop.time()) < most_s:
            loop.remove_reader(fd)
            loop.call_later(STEP_S, look_again, fd, args)
            return
        since.pop(fd, None)
        accept(factory, sock, ssl, server, 1, *rest[1:])  # rest[0] is asyncio's backlog
        # The connection is counted when its protocol starts, a loop turn or two later: until
        # then this worker takes no other (False: asyncio paused the socket itself, out of fds).
        if loop.remove_reader(fd):
            loop.call_later(STEP_S, look_again, fd, args)

    def look_again(fd: int, args: tuple[Any, ...]) -> None:
        sock = args[1]
        if sock.fileno() != fd:  # the server closed meanwhile
            return
        if not select.select([sock], [], [], 0)[0]:
            since.pop(fd, None)  # a sibling took what was waiting: the next one starts a new wait
        loop.add_reader(fd, in_turn, *args)

    loop._accept_connection = in_turn  # type: ignore[attr-defined]
    return True


class CountedConnections(asyncio.Protocol):
    """A mixin for a uvicorn HTTP protocol (before it in the bases): its connections are counted
    in this process's tally, once ``install`` made one."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """A client connected."""
        super().connection_made(transport)
        if current is not None:
            current.opened()

    def connection_lost(self, exc: Exception | None) -> None:
        """The client's connection ended."""
        if current is not None:
            current.closed()
        super().connection_lost(exc)


def install(loop: asyncio.AbstractEventLoop, folder: Path) -> Tally | None:
    """In a worker process: a tally in ``folder`` (the workers' shared one) and ``loop`` accepting
    in turn with it; None where the loop cannot (then nothing changes)."""
    global current
    if not hasattr(os, "pwrite"):  # Windows (whose os.kill would end the sibling it asks about)
        return None
    tally = Tally(folder)
    if not accept_in_turn(loop, tally, sibling_wait()):
        tally.close()
        return None
    current = tally
    return tally

"""The client's lines on stdio, read by a daemon thread into a queue, for both of ``coffer-mcp``'s paths.

The SDK's own stdin (``anyio.wrap_file``) reads each line in a worker thread that a cancelled run
waits for: after one Ctrl-C the process ran on until the client closed stdin. Here a daemon thread
does the blocking read and the SDK waits on the queue in a worker thread it may abandon; ``end``
puts the end of the stream on the queue, which lets that worker go (the interpreter waits for it
at exit).
"""

from __future__ import annotations

import io
import queue
import threading
from typing import Any, BinaryIO

__all__ = ["EOF", "LineSource", "end", "next_item", "read_lines", "start_reader"]

EOF = object()
"""The end of the client's stream (or a read error), put once after its last line."""


def read_lines(wire_in: BinaryIO, lines: queue.Queue[object]) -> None:
    """Put each line of ``wire_in`` on ``lines``, then ``EOF``."""
    try:
        # The SDK's own framing: UTF-8 with replacement, universal newlines.
        for line in io.TextIOWrapper(wire_in, encoding="utf-8", errors="replace"):
            lines.put(line)
    finally:  # a read error ends the session as EOF does, never leaves it waiting
        lines.put(EOF)


def start_reader(wire_in: BinaryIO, lines: queue.Queue[object]) -> None:
    """Read ``wire_in`` onto ``lines`` in a daemon thread (it never keeps the process alive)."""
    threading.Thread(target=read_lines, args=(wire_in, lines), name="coffer-mcp-stdin", daemon=True).start()


def next_item(lines: queue.Queue[object]) -> object:
    """The queue's next item, waking twice a second: a SIGINT the kernel gave to another thread
    (the stdin reader's, the builder's) only trips a flag, which the main thread reads when it
    runs; blocked in a lock with no timeout it never did, and a Ctrl-C left coffer-mcp running."""
    while True:
        try:
            return lines.get(timeout=0.5)
        except queue.Empty:
            continue


def end(lines: queue.Queue[object]) -> None:
    """Let go of whatever waits on ``lines``: a run ended by Ctrl-C (or an error) with the client
    still connected leaves a worker thread of ``LineSource`` waiting for the next line; anyio
    abandons it, but the interpreter waits for it at exit, until the client closed stdin."""
    lines.put(EOF)


class LineSource:
    """The SDK's stdin: the lines ``first`` (a replay), then those read onto ``lines``."""

    def __init__(self, first: list[str], lines: queue.Queue[object]) -> None:
        self._first = first
        self._lines = lines

    def __aiter__(self) -> LineSource:
        return self

    async def __anext__(self) -> str:
        if self._first:
            return self._first.pop(0)
        import anyio

        item: Any = await anyio.to_thread.run_sync(self._lines.get, abandon_on_cancel=True)
        if item is EOF:
            self._lines.put(EOF)  # EOF stays EOF for any later read
            raise StopAsyncIteration
        assert isinstance(item, str)
        return item

"""Read the files a bulk load indexes a few dozen at a time, before parsing them.

A cold rebuild reads and parses every file. Done one file at a time, each read's system calls
(open, fstat, read, close) evicted what the parser had in the CPU caches: reading a window of
files first, then parsing them, took 10-15% less CPU per file at 10k files (docs/benchmarks.md,
"Rebuild at the limit, session 17"). What each file's read gave (its bytes and stat, or the error)
reaches the indexer as it would have, in the same order, under the same store lock.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Protocol, TypeVar

from .._store.files import FactParseError
from .._store.files import read_bytes as read_bytes  # tests count the reads here

# Files and bytes read ahead at most: enough to part the reads from the parsing, never many
# large files in memory at once (a file may be up to ``[memory] max_file_bytes``).
WINDOW_FILES = 64
WINDOW_BYTES = 8 * 1024 * 1024

Read = tuple[bytes, os.stat_result] | OSError | FactParseError


class _Entry(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def absent(self) -> bool: ...


E = TypeVar("E", bound=_Entry)


def read_ahead(entries: Iterable[E], max_bytes: int) -> Iterator[tuple[E, Read | None]]:
    """Each entry with what reading its file gave, read a window ahead (``None`` for an entry
    the index has a row for: ``index_file`` reads it itself)."""
    window: list[tuple[E, Read | None]] = []
    held = 0
    for entry in entries:
        read: Read | None = None
        if entry.absent:
            try:
                read = read_bytes(entry.path, max_bytes=max_bytes)
                held += len(read[0])
            except (OSError, FactParseError) as exc:
                read = exc
        window.append((entry, read))
        if len(window) >= WINDOW_FILES or held >= WINDOW_BYTES:
            yield from window
            window = []
            held = 0
    yield from window

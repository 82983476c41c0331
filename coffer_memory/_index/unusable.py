"""Why ``index.db`` cannot be used now, as ``IndexUnavailable`` says it: an entry of its name that
is no file, no room to open it, another process's write held past the busy timeout.

Each reached the faces as a raw apsw error ("unexpected CantOpenError", "unexpected BusyError:
database is locked"); none is damage (nothing is moved aside), and the next call tries again.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from pathlib import Path

import apsw

from .._errors import IndexUnavailable


class IndexBusy(IndexUnavailable, apsw.BusyError):
    """Another process held the index's write lock past the busy timeout (a long write, such as
    ``coffer reindex --rebuild``): ``INDEX_UNAVAILABLE`` to every face, and still an
    ``apsw.BusyError`` to the index's own code that leaves the work for a later turn (a recall's
    reconcile answers from the index as it stands, a merge of the word index waits)."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        super().__init__(
            "sqlite",
            f"{path} is busy: another process has held its write lock for over {busy_timeout_ms} ms "
            "(a long write; busy_timeout_ms says how long to wait)",
        )


def unopenable(path: Path, exc: apsw.Error) -> str:
    """Why ``path`` could not be opened: an entry of its name that is no file (a folder, a FIFO:
    never moved aside, it may hold someone's data), else no room for its -shm or -wal."""
    for entry in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with suppress(OSError):
            mode = os.stat(entry).st_mode
            if not stat.S_ISREG(mode):
                kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device"
                return f"cannot open {path}: {entry} is {kind}, not a file; move it away"
    if isinstance(exc, apsw.CantOpenError):
        return f"cannot open {path}: {exc}"
    return f"cannot open {path}: {exc} (is the disk full, or a file size limit set?)"

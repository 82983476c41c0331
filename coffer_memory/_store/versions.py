"""Store versions: ``locks/<store>.version``, a counter every change to a store advances.

Pagination cursors are bound to it (``cursor.py``). The Writer advances it after each write
transaction; the reconciler advances it when it finds a file changed outside coffer, so a
cursor made before an edit in an editor is refused too.
"""

from __future__ import annotations

import errno
from pathlib import Path

from .._home import HomeLayout
from .files import FileTooLarge, atomic_write, read_bytes
from .lock import store_lock
from .paths import lock_path


def read_version(home: Path, store: str) -> int:
    """The store's version (0 before the first change, or when something else stands in the way
    of its file: no change can be made then, see ``lock.py``); ``store`` is a validated name."""
    try:  # without blocking, a regular file only: a FIFO in its place hung every list and write
        raw, _ = read_bytes(HomeLayout(home).store_version(store), max_bytes=64)
        return int(raw or 0)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, FileTooLarge, ValueError):
        return 0
    except OSError as exc:  # a link: never followed (the next bump writes a file in its place)
        if exc.errno != errno.ELOOP:
            raise
        return 0


def bump_version(home: Path, store: str) -> int:
    """Advance the store's version under its write lock; every cursor made before becomes stale."""
    with store_lock(lock_path(home, store)):
        version = read_version(home, store) + 1
        atomic_write(HomeLayout(home).store_version(store), str(version).encode())
    return version

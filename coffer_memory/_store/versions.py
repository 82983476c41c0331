"""Store versions: ``locks/<store>.version``, a counter every change to a store advances.

Pagination cursors are bound to it (``cursor.py``). The Writer advances it after each write
transaction; the reconciler advances it when it finds a file changed outside coffer, so a
cursor made before an edit in an editor is refused too.
"""

from __future__ import annotations

from pathlib import Path

from .._home import HomeLayout
from .files import atomic_write
from .lock import store_lock
from .paths import lock_path


def read_version(home: Path, store: str) -> int:
    """The store's version (0 before the first change, or when something else stands in the way
    of its file: no change can be made then, see ``lock.py``); ``store`` is a validated name."""
    try:
        return int(HomeLayout(home).store_version(store).read_text() or 0)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, ValueError):
        return 0


def bump_version(home: Path, store: str) -> int:
    """Advance the store's version under its write lock; every cursor made before becomes stale."""
    with store_lock(lock_path(home, store)):
        version = read_version(home, store) + 1
        atomic_write(HomeLayout(home).store_version(store), str(version).encode())
    return version

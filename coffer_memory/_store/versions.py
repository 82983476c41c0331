"""Store versions: ``locks/<store>.version``, a counter every change to a store advances.

Pagination cursors are bound to it (``cursor.py``). The Writer advances it after each write
transaction; the reconciler advances it when it finds a file changed outside coffer, so a
cursor made before an edit in an editor is refused too.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from .._home import HomeLayout
from .files import FileTooLarge, atomic_write, read_bytes
from .lock import store_lock
from .paths import lock_path

log = logging.getLogger(__name__)

# What a disk with no room left answers (no block, no inode, a quota, a file size limit).
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


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
        path = HomeLayout(home).store_version(store)
        try:
            atomic_write(path, str(version).encode())
        except OSError as exc:
            # The change this counts is made already (an entry appended, a file deleted): a disk
            # with no room for the temp file must not turn it into a reported failure.
            if exc.errno not in _FULL:
                raise
            _rewrite_in_place(path, version)
    return version


def _rewrite_in_place(path: Path, version: int) -> None:
    """Write ``version`` over the file's first bytes, which needs no new file or block: the
    counter only grows, so its digits cover the old ones. A version that cannot be written at
    all is logged; the change stands and cursors made before it are not refused."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        log.warning("could not advance the version in %s (%s); the change is made", path, exc.strerror)
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.pwrite(fd, str(version).encode(), 0)
            os.fsync(fd)
    except OSError as exc:
        log.warning("could not advance the version in %s (%s); the change is made", path, exc.strerror)
    finally:
        os.close(fd)

"""A per-store inter-process write lock (``flock`` on a file under ``<home>/locks``)."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .._errors import StorageFull, StorageNotWritable
from .files import ensure_dir


class _PathLock:
    """A thread lock plus an flock; re-entrant within one thread."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_locks: dict[str, _PathLock] = {}
_guard = threading.Lock()


def _path_lock(path: Path) -> _PathLock:
    with _guard:
        return _locks.setdefault(str(path), _PathLock())


# A disk with no block or inode left, a quota reached.
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
# A file where the lock folder should be, a folder (or a link loop) where a lock file should be.
_IN_THE_WAY = frozenset({errno.ENOTDIR, errno.EISDIR, errno.ELOOP})


def _in_the_way(path: Path, exc: OSError) -> StorageNotWritable:
    """The typed error for a lock that cannot be made, naming the entry in its way: every
    command of the home died with a raw ``NotADirectoryError`` (reads too: reconcile locks)."""
    for entry in (path, *path.parents):
        if os.path.lexists(entry):
            kind = "a folder" if entry.is_dir() else "not a folder"
            where = "its lock file" if entry == path else "the lock files"
            return StorageNotWritable(str(entry), f"{kind}, where {where} should be; move it away")
    return StorageNotWritable(str(path), os.strerror(exc.errno or 0))


# The lock folders of homes this process may only read (``read_only_locks``).
_read_only: set[str] = set()


def read_only_locks(folder: Path, read_only: bool) -> None:
    """Whether the lock files under ``folder`` (a home's ``locks/``) are only taken where they
    are, never made: a home this process may read, not write (``check_home``), creates nothing,
    even where a folder below it was left writable (a service reading it made
    ``locks/index-repair.lock`` and ``locks/<store>.lock`` there)."""
    with _guard:
        (_read_only.add if read_only else _read_only.discard)(str(folder))


def _lock_fd(path: Path) -> int | None:
    """The lock file, opened to ``flock``; None in a home this process may not write, where it
    only reads (its writes fail on their own files): a lock file that is there is still taken
    (``flock`` needs no write access), so a writer of the home's owner is waited for."""
    try:
        if str(path.parent) in _read_only:
            raise PermissionError(errno.EACCES, "a home this process may only read", str(path))
        ensure_dir(path.parent)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        if exc.errno in _IN_THE_WAY:
            raise _in_the_way(path, exc) from None
        if exc.errno in _FULL:  # no inode or block left for the lock folder or file
            raise StorageFull(str(exc.filename or path), os.strerror(exc.errno or 0)) from None
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


@contextmanager
def store_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive write lock at ``path`` for the duration of the block.

    Threads of one process queue on a thread lock; processes queue on ``flock``. A thread
    that already holds the lock may enter again (flock alone would deadlock on itself).
    """
    entry = _path_lock(path)
    with entry.lock:
        if entry.depth == 0:
            fd = _lock_fd(path)
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
            entry.fd = fd
        entry.depth += 1
        try:
            yield
        finally:
            entry.depth -= 1
            if entry.depth == 0 and entry.fd is not None:
                os.close(entry.fd)  # closing the descriptor releases the flock
                entry.fd = None


@contextmanager
def shared_lock(path: Path) -> Iterator[None]:
    """Hold the lock at ``path`` shared for the block: beside other shared holders, never beside
    ``store_lock``'s exclusive hold of it (another process's, or another thread's). Best effort:
    where the lock file cannot be made (a file in place of ``locks/``, a home this process may
    only read) the block runs without it, as reads there do."""
    try:
        fd = _lock_fd(path)
    except StorageNotWritable:
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

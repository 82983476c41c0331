"""What one read saw of the disk, handed between its steps so that each thing is looked at once.

A keyword recall at 1k facts made twelve ``stat`` calls where plain FTS5 makes two: the project
store's folder three times (the target's check that its store is there, the recall's "present"
check, the inotify feed's check of the folder's identity), the global store's twice, and the
index file three times (the writer's cut-short check in each store's reconcile, the reader's
before its read). A ``Looks`` lives for one call (a recall) and carries the answers from the step
that took them to the steps after it: each store folder is looked at once (one ``lstat``, which
answers both whether it is a folder and whether it is a symbolic link: the check that refuses a
folder linked to another store's asked ``lstat`` twice more a store, kw24), the index file's size
once, and the inotify feed's queue is read once for all the stores (it was read per store). Nothing
is kept between calls: the next recall looks again, so an edit, a moved store or a file cut short
is seen exactly as before.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from stat import S_ISDIR, S_ISLNK

# The errors ``Path.is_dir`` answers False for (pathlib's ``_IGNORED_ERRNOS``); any other is raised.
_NOT_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


class Looks:
    """The stat of each store folder one call took (``None``: not there; followed through a
    symbolic link) and whether the folder is a link, whether the index
    file's size was checked in this call with nothing written since (``index_checked``), and the
    inotify feed whose queue this call has read (``drained``: the feed's ``news`` of a second
    store does not read it again)."""

    __slots__ = ("_asked", "drained", "folders", "index_checked")

    def __init__(self) -> None:
        self.folders: dict[str, tuple[str, os.stat_result | None, bool]] = {}
        self._asked: dict[str, Path] = {}  # the Path each store's look in ``folders`` was asked with
        self.index_checked = False
        self.drained: object | None = None

    def is_dir(self, store: str, root: Path) -> bool:
        """Whether ``root`` (the folder of ``store``) is a directory, as ``Path.is_dir`` says; stat'ed
        once per call, the answer kept for the steps after this one."""
        st = self._held(store, root)[1]
        return st is not None and S_ISDIR(st.st_mode)

    def is_link(self, store: str, root: Path) -> bool:
        """Whether ``root`` (the folder of ``store``) is a symbolic link, as ``os.path.islink``
        says; from the same look as ``is_dir``."""
        return self._held(store, root)[2]

    def _held(self, store: str, root: Path) -> tuple[str, os.stat_result | None, bool]:
        held = self.folders.get(store)
        # The Path a look was asked with answers for itself: a recall's steps ask with one store's
        # one ``StorePaths.root`` (``os.fspath`` of a Path is two Python calls, seven times a recall).
        if held is not None and self._asked.get(store) is root:
            return held
        path = os.fspath(root)
        if held is None or held[0] != path:
            held = self.folders[store] = _look(path)
        self._asked[store] = root
        return held

    def folder(self, store: str, root: str) -> tuple[os.stat_result | None] | None:
        """The stat of ``root`` (the folder of ``store``) this call took, as a one-item tuple (its
        item ``None`` when the folder was not there), or ``None`` when it took none of that path."""
        held = self.folders.get(store)
        return (held[1],) if held is not None and held[0] == root else None


def _look(path: str) -> tuple[str, os.stat_result | None, bool]:
    """``path``, its stat (through a link) and whether it is a link: one ``lstat``, and a ``stat``
    only for a link (for a path that is no link the two are the same)."""
    st = _stat(path, os.lstat)
    if st is not None and S_ISLNK(st.st_mode):
        return path, _stat(path, os.stat), True
    return path, st, False


def _stat(path: str, how: Callable[[str], os.stat_result]) -> os.stat_result | None:
    try:
        return how(path)
    except OSError as exc:
        if exc.errno not in _NOT_THERE:
            raise
        return None
    except ValueError:  # a NUL in the path
        return None

"""A change feed for long-lived processes on Linux: which recall files changed, from inotify.

A large store (over ``reconcile_full_scan_max_files``) otherwise learns of an in-place edit only
from the full stat scan of every file, and a small one stats every file on every read. Here each
recall folder of a store (and the store root, for its own moves and its top folders') has an
inotify watch on one non-blocking fd per reconciler; each read drains the queue first. The kernel queues an event before the writer's
``write``/``rename``/``unlink`` returns, so a read that starts after an edit sees it, at the cost
of one ``read`` that finds nothing. No thread is needed.

The feed vouches for a store only from the end of the first full scan that *started* after its
watches were added (the scan covers what happened before, the events what happens after; the
reconciler arms a store at the start of a full scan: one that falls due anyway for a larger
store, the first read's for a small one, whose file-by-file check the scan replaces) until
anything it cannot account for: a queue overflow, a failed ``inotify_add_watch``
(``max_user_watches``, a folder it may not read), the store folder itself moved, replaced or
unmounted, a fork (the child shares the parent's queue: it closes its copy and starts over), a
network file system (inotify only sees this machine's writes), a platform without inotify. Then
the reconciler falls back to folder mtimes and the periodic full scan, whose next run arms it anew.
A folder made, moved or removed under a watched one (a top recall folder too) is watched anew and
scanned alone. An event names the path a write went through: a file with another hard link is
named on every read (``relink``), and a link made outside the store later is left to the next
full scan.

Libraries looked at (``inotify_simple``, ``asyncinotify``, ``watchdog``, ``watchfiles``): the last
two deliver events from their own thread or a debounced generator, not a synchronous drain of the
queue at the start of a read; the first two are the same ~60 lines of ctypes as here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import struct
import sys
import threading
from collections.abc import Callable, Iterable
from functools import cache
from stat import S_ISDIR, S_ISLNK, S_ISREG
from typing import TYPE_CHECKING, Any

from .looks import Looks
from .paths import is_recall_rel
from .scan import BAD_NAME, FileStat, OddFiles, file_stat, odd_kind, utf8_name

if TYPE_CHECKING:
    import ctypes

log = logging.getLogger("coffer_memory.watch")

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000
_SELF = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT
_ENTRIES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
FOLDER_MASK = (
    IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | _ENTRIES | _SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
)
ROOT_MASK = _ENTRIES | _SELF | IN_ONLYDIR | IN_DONT_FOLLOW
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
READ_BYTES = 64 * 1024
# statfs f_type of file systems whose other clients' writes raise no inotify event here.
REMOTE_FS = frozenset(
    {
        0x6969,  # NFS
        0x517B,  # SMB
        0xFF534D42,  # CIFS
        0xFE534D42,  # SMB2
        0x65735546,  # FUSE (sshfs, rclone, cloud drives)
        0x00C36400,  # Ceph
        0x5346414F,  # AFS
        0x01021997,  # 9p
        0x01161970,  # GFS2
        0x7461636F,  # OCFS2
        0x0BD00BD0,  # Lustre
    }
)


@cache
def _libc() -> ctypes.CDLL | None:
    """libc with its inotify calls, or None. ctypes is imported here, on first use: a process that
    never watches (the CLI) does not pay the ~3 ms of its import."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _ = libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch, libc.statfs
    except (OSError, AttributeError):
        return None
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    return libc


def _errno() -> int:
    import ctypes

    return ctypes.get_errno()


def is_remote(path: str) -> bool:
    """True when ``path`` lies on a network file system (or its type cannot be learnt)."""
    import ctypes

    libc = _libc()
    if libc is None:
        return True
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if libc.statfs(os.fsencode(path), buf) != 0:
        return True
    return (ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF) in REMOTE_FS  # f_type comes first


class WatchFailed(OSError):
    """inotify cannot watch a folder here (the feed falls back for that store)."""


class _Store:
    """One watched store: its watches and what changed since the last read took it (a plain class:
    attrs would cost the import a millisecond)."""

    def __init__(
        self,
        root: str,
        identity: tuple[int, int],
        tops: frozenset[str],
        epoch: int,
        accept: Callable[[str], bool],
    ) -> None:
        self.root = root
        self.accept = accept  # which root-relative file paths are news
        self.identity = identity  # (st_dev, st_ino) of the root when armed
        self.tops = tops  # the top recall folders ("knowledge", "journal")
        self.epoch = epoch
        self.wds: set[int] = set()
        self.verified = False
        self.lost = False
        self.files: set[str] = set()  # store-relative recall files to re-check
        self.trees: set[str] = set()  # store-relative folders to re-watch and re-scan
        self.linked: set[str] = set()  # files with another hard link: re-checked on every read


class FolderFeed:
    """The inotify feed of one reconciler. Thread-safe; ``close`` releases the fd."""

    def __init__(self) -> None:
        self._fd = -1
        self._poll: tuple[int, select.poll] | None = None  # ``_drain``'s poll object, of this fd number
        self._pid = os.getpid()
        self._guard = threading.Lock()
        self._stores: dict[str, _Store] = {}
        self._wds: dict[int, tuple[str, str]] = {}  # wd -> (store, relative folder; "" = the root)
        self._unwatchable: set[str] = set()  # stores inotify cannot cover (sticky for this feed)
        self._epoch = 0

    @staticmethod
    def supported() -> bool:
        """True where inotify is available (Linux)."""
        return _libc() is not None

    @property
    def fd(self) -> int:
        """The inotify fd, or -1 before the first watch (and after ``close``)."""
        return self._fd

    # -- state ----------------------------------------------------------------------------------
    def _owned(self) -> None:
        """After a fork the child's fd is the parent's queue: drop the copy and start over."""
        if os.getpid() != self._pid:
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd = -1
            self._pid = os.getpid()
            self._stores.clear()
            self._wds.clear()
            self._unwatchable.clear()

    def status(self, store: str) -> str:
        """``verified`` (the feed vouches), ``armed`` (awaiting its full scan), ``off`` or ``unwatchable``."""
        with self._guard:
            self._owned()
            if store in self._unwatchable:
                return "unwatchable"
            watched = self._stores.get(store)
            if watched is None or watched.lost:
                return "off"
            return "verified" if watched.verified else "armed"

    def epoch(self, store: str) -> int | None:
        """Taken when a full scan starts: the scan verifies the watches only if they stay as they were."""
        with self._guard:
            self._owned()
            watched = self._stores.get(store)
            return None if watched is None or watched.lost else watched.epoch

    def verify(self, store: str, epoch: int | None) -> None:
        """A full scan that started at ``epoch`` has finished: from now on the feed vouches."""
        if epoch is None:
            return
        with self._guard:
            self._owned()
            self._drain()  # an overflow queued during the scan must not be verified away
            watched = self._stores.get(store)
            if watched is not None and watched.epoch == epoch and not watched.lost:
                watched.verified = True

    def relink(
        self, store: str, linked: set[str], checked: Iterable[str] = (), trees: Iterable[str] = ()
    ) -> None:
        """A scan of the files ``checked`` and the folders ``trees`` found ``linked`` among them with
        another hard link. A write through that link names it, not the file here, so the feed names
        them on every read until a scan finds them with one link again."""
        with self._guard:
            self._owned()
            watched = self._stores.get(store)
            if watched is None:
                return
            folders = tuple(trees)
            watched.linked.difference_update(checked)
            watched.linked = {f for f in watched.linked if not any(under(f, t) for t in folders)} | linked

    def lose(self, store: str) -> None:
        """Stop vouching for ``store`` (until it is armed and verified again)."""
        with self._guard:
            self._owned()
            watched = self._stores.get(store)
            if watched is not None:
                watched.lost = True

    # -- arming ---------------------------------------------------------------------------------
    def arm(
        self, store: str, root: str, tops: Iterable[str], accept: Callable[[str], bool] = is_recall_rel
    ) -> bool:
        """Watch ``root`` and every folder under its ``tops`` (anew); False when that cannot be done.
        Files ``accept`` takes (a path relative to ``root``) are news; hidden ones never are."""
        with self._guard:
            self._owned()
            if store in self._unwatchable:
                return False
            self._drop(store)
            try:
                self._open()
                st = os.stat(root)
                if is_remote(root):
                    raise WatchFailed(f"{root} is on a network file system")
                self._epoch += 1
                watched = _Store(root, (st.st_dev, st.st_ino), frozenset(tops), self._epoch, accept)
                self._stores[store] = watched
                self._add(store, "", ROOT_MASK)
                for top in sorted(watched.tops):
                    self._add_tree(store, top)
            except OSError as exc:
                self._drop(store)
                self._unwatchable.add(store)
                log.info("outside edits to %s are found by scanning: cannot watch it (%s)", store, exc)
                return False
            return True

    def rewatch(self, store: str, rel: str) -> None:
        """Watch the folder ``rel`` and its subfolders anew (before they are scanned again)."""
        with self._guard:
            self._owned()
            watched = self._stores.get(store)
            if watched is None:
                return
            for wd in [w for w in watched.wds if under(self._wds[w][1], rel)]:
                self._rm(wd)
            try:
                self._add_tree(store, rel)
            except OSError as exc:
                watched.lost = True
                log.info("stopped watching %s: %s", store, exc)

    def _open(self) -> None:
        if self._fd >= 0:
            return
        libc = _libc()
        if libc is None:
            raise WatchFailed("inotify is not available on this platform")
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            errno = _errno()
            raise WatchFailed(errno, f"inotify_init1: {os.strerror(errno)}")
        self._fd = fd

    def _add(self, store: str, rel: str, mask: int) -> None:
        watched = self._stores[store]
        path = f"{watched.root}/{rel}" if rel else watched.root
        libc: Any = _libc()
        wd = libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            errno = _errno()
            raise WatchFailed(errno, f"inotify_add_watch {path}: {os.strerror(errno)}")
        old = self._wds.get(wd)
        if old is not None and old[0] != store:  # one folder in two stores: cannot tell them apart
            raise WatchFailed(f"{path} is watched for {old[0]} too")
        self._wds[wd] = (store, rel)
        watched.wds.add(wd)

    def _add_tree(self, store: str, top: str) -> None:
        """Watch ``top`` and the visible folders under it; a missing ``top`` is fine (the root or its
        parent's watch reports its creation)."""
        root = self._stores[store].root
        stack = [top]
        while stack:
            rel = stack.pop()
            try:
                st = os.lstat(f"{root}/{rel}")
            except (FileNotFoundError, NotADirectoryError):
                continue
            if not S_ISDIR(st.st_mode):
                if rel == top and "/" not in top:  # a top folder that is a symlink: not ours to follow
                    raise WatchFailed(f"{root}/{rel} is not a folder")
                continue
            self._add(store, rel, FOLDER_MASK)
            try:
                with os.scandir(f"{root}/{rel}") as entries:
                    for entry in entries:
                        if entry.name[0] != "." and entry.is_dir(follow_symlinks=False):
                            stack.append(f"{rel}/{entry.name}")
            except (FileNotFoundError, NotADirectoryError):
                continue

    def _rm(self, wd: int) -> None:
        store, _ = self._wds.pop(wd)
        self._stores[store].wds.discard(wd)
        libc = _libc()
        if libc is not None and self._fd >= 0:
            libc.inotify_rm_watch(self._fd, wd)  # EINVAL when the kernel dropped it already

    def _drop(self, store: str) -> None:
        watched = self._stores.get(store)
        if watched is None:
            return
        for wd in list(watched.wds):
            self._rm(wd)
        del self._stores[store]

    # -- reading --------------------------------------------------------------------------------
    def news(self, store: str, looks: Looks | None = None) -> tuple[set[str], set[str]] | None:
        """The recall files and the folders of ``store`` changed since the last call, or None when
        the feed cannot vouch for it. Reads the queue first. ``looks``: the read's ``Looks``; the
        stat of the store folder it took is the identity check's (else the folder is stat'ed), and
        the queue is read once for all the stores it reads (what comes after is the next read's)."""
        with self._guard:
            if looks is None or looks.drained is not self:
                self._owned()
                self._drain()
                if looks is not None:
                    looks.drained = self
            watched = self._stores.get(store)
            if watched is None or not watched.verified or watched.lost:
                return None
            if not watched.lost:
                seen = looks.folder(store, watched.root) if looks is not None else None
                try:
                    st = os.stat(watched.root) if seen is None else seen[0]
                    watched.lost = st is None or (st.st_dev, st.st_ino) != watched.identity
                except OSError:
                    watched.lost = True
            if watched.lost:
                return None
            files, trees = watched.files | watched.linked, watched.trees
            watched.files, watched.trees = set(), set()
            return files, trees

    def pending(self, store: str) -> bool:
        """True when the feed vouches for ``store`` and holds news of it (reads the queue first)."""
        with self._guard:
            self._owned()
            self._drain()
            watched = self._stores.get(store)
            return (
                watched is not None
                and watched.verified
                and not watched.lost
                and bool(watched.files or watched.trees)
            )

    def vouches(self, store: str) -> bool | None:
        """Whether a read of ``store`` may skip its checks: True when the feed vouches for it (its
        folder still the one armed) and names nothing to re-check (no news, no file with another
        hard link), False when it vouches but names something, None when it cannot vouch. Reads
        the queue first."""
        with self._guard:
            self._owned()
            self._drain()
            watched = self._stores.get(store)
            if watched is None or not watched.verified or watched.lost:
                return None
            try:
                st = os.stat(watched.root)
                watched.lost = (st.st_dev, st.st_ino) != watched.identity
            except OSError:
                watched.lost = True
            if watched.lost:
                return None
            return not (watched.files or watched.trees or watched.linked)

    def _drain(self) -> None:
        if self._fd < 0:
            return
        # Asked first whether the queue holds anything: an empty queue's read raised
        # BlockingIOError on every recall (an OSError made and caught: ~6 k instructions, 0.2% of
        # a 1k keyword recall, kw29b). A poll object holds fd numbers, each looked up at each call.
        if self._poll is None or self._poll[0] != self._fd:
            poll = select.poll()
            poll.register(self._fd, select.POLLIN)
            self._poll = (self._fd, poll)
        polled = self._poll[1].poll
        while True:
            if not polled(0):
                return
            try:
                data = os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("reading the inotify queue failed: %s", exc)
                self._overflow()
                return
            if not data:
                return
            at = 0
            while at + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, at)
                at += _EVENT.size
                name = data[at : at + size].split(b"\0", 1)[0]
                at += size
                self._event(wd, mask, os.fsdecode(name))

    def _overflow(self) -> None:
        for watched in self._stores.values():
            watched.lost = True

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            log.info(
                "the inotify queue overflowed: outside edits are found by scanning until the next full scan"
            )
            self._overflow()
            return
        where = self._wds.get(wd)
        if where is None:  # a watch removed by rewatch: its last events are stale
            return
        store, rel = where
        watched = self._stores[store]
        if mask & IN_IGNORED:  # its folder is gone (or unmounted): watch and scan it anew
            del self._wds[wd]
            watched.wds.discard(wd)
        if mask & (_SELF | IN_IGNORED):
            if rel:
                watched.trees.add(rel)
            else:  # the store folder itself: its identity is no longer known
                watched.lost = True
            return
        if not name or name[0] == ".":
            return
        if not rel:  # the root: only its top recall folders matter
            if name in watched.tops:
                watched.trees.add(name)
            return
        path = f"{rel}/{name}"
        if not utf8_name(path):  # the scans skip a name that is not UTF-8 (no row can hold it)
            return
        if mask & IN_ISDIR:
            watched.trees.add(path)
        elif watched.accept(path):
            watched.files.add(path)

    def close(self) -> None:
        """Release the fd and every watch (a later ``arm`` opens a new one)."""
        with self._guard:
            self._owned()
            if self._fd >= 0:
                os.close(self._fd)
            self._fd = -1
            self._stores.clear()
            self._wds.clear()

    def __del__(self) -> None:  # a service never closed must not keep its fd (128 per user)
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)


def under(rel: str, tree: str) -> bool:
    """True when the store-relative ``rel`` is ``tree`` or lies under it."""
    return rel == tree or rel.startswith(tree + "/")


def walkable(root: str, rel: str) -> bool:
    """True when a re-scan may enter the folder ``rel`` (relative to ``root``) the feed named: a top
    folder always (the full scan and ripgrep follow a path they are given), one below it only when
    it is a real folder, not a symlink put in its place (neither follows that)."""
    if "/" not in rel:
        return True
    try:
        return S_ISDIR(os.lstat(f"{root}/{rel}").st_mode)
    except OSError:
        return False


def recall_stat(
    root: str, rel: str, odd: OddFiles | None = None, linked: set[str] | None = None
) -> FileStat | None:
    """The stat of one recall file as the full scan would take it, or None (gone, a symlink,
    unreadable or odd: an odd one goes into ``odd`` with the reason; one with another hard link
    into ``linked``)."""
    try:
        st = os.lstat(f"{root}/{rel}")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        if odd is not None:
            odd[rel] = "file cannot be read (permission denied)"
        return None
    if S_ISLNK(st.st_mode):
        return None
    reason = None if S_ISREG(st.st_mode) else odd_kind(st.st_mode)
    if reason is None and not utf8_name(rel.rsplit("/", 1)[-1]):
        reason = BAD_NAME
    if reason is None:
        if linked is not None and st.st_nlink > 1:
            linked.add(rel)
        return file_stat(st)
    if odd is not None:
        odd[rel] = reason
    return None

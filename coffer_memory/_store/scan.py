"""Scan store folders: which memory files there are, their stat tuples, and what is skipped.

Kept apart from parsing and writing (``files``): the reconcile fast path, ``doctor`` and the
stale-temp sweep walk folders without reading a file.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

TEMP_PREFIX = ".tmp-"  # hidden, so scans and grep never see a half-written file


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symlink",
}


def odd_kind(mode: int) -> str:
    """Why a ``*.md`` entry is not read: ``not a regular file (a FIFO)`` and the like."""
    return f"not a regular file ({_KINDS.get(stat.S_IFMT(mode), 'unknown type')})"


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (a link to one is followed).

    Opened non-blocking and checked first: a FIFO named ``*.jsonl`` among an agent's transcripts
    blocked the session listing for ever, and a link to ``/dev/zero`` was read without end. Anything
    else raises ``OSError``, which the readers of agent files treat as a file they cannot read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({odd_kind(mode)})", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


BAD_NAME = "file name is not valid UTF-8"
UNREADABLE_FOLDER = "folder cannot be read (permission denied)"
# A path past the system's limit (PATH_MAX, 4096 bytes on Linux) cannot be opened by its name.
TOO_LONG = "path is longer than the system allows: never indexed; move it up or shorten its names"


def utf8_name(name: str) -> bool:
    """True when a name read from the OS is valid UTF-8 (undecodable bytes come back as surrogates)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(path: str | Path) -> str:
    """A path for messages and reports: undecodable bytes shown as ``\\xe9`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


class FileStat(NamedTuple):
    """What the reconcile fast path compares (a tuple: hot path).

    Size and mtime alone miss an edit that keeps both (``cp -p``, ``rsync -t``, ``touch -r``);
    the ctime (which no tool can set back) and the inode catch it.
    """

    size: int
    mtime_ns: int
    ctime_ns: int = -1
    ino: int = -1


def file_stat(st: os.stat_result) -> FileStat:
    """The ``FileStat`` of an ``os.stat_result``."""
    return FileStat(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


# A rel path -> why it is not read (odd names, FIFOs and other non-regular ``*.md`` entries).
OddFiles = dict[str, str]


def scan_markdown(
    root: Path, folders: tuple[Path, ...], odd: OddFiles | None = None, linked: set[str] | None = None
) -> tuple[dict[str, FileStat], dict[str, int]]:
    """Every visible ``*.md`` regular file under ``folders`` (relative to ``root``) and folder mtimes.

    Hidden entries (temp files among them) and symlinks are skipped. Entries that cannot be
    indexed (a name that is not UTF-8, a FIFO named ``*.md``) are skipped and, when ``odd``
    is given, put there with the reason. ``linked`` (when given) gets the files with another
    hard link: a write through that one raises no inotify event for their own name.
    """
    files: dict[str, FileStat] = {}
    dirs: dict[str, int] = {}
    for folder in folders:
        for rel_dir, entries in _walk(root, folder, dirs, odd, linked):
            for name, st in entries:
                files[f"{rel_dir}/{name}"] = st
    return files, dirs


def _entry(
    entry: os.DirEntry[str], rel_dir: str, odd: OddFiles | None, linked: set[str] | None = None
) -> FileStat | None:
    """The stat of a ``*.md`` entry worth indexing, or None (an odd one goes into ``odd``)."""
    try:
        st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None
    except PermissionError:  # a folder that may be listed but not searched (r without x)
        if odd is not None:
            odd[f"{rel_dir}/{entry.name}"] = "file cannot be read (permission denied)"
        return None
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        if odd is not None:
            odd[f"{rel_dir}/{entry.name}"] = TOO_LONG
        return None
    if stat.S_ISLNK(st.st_mode):
        return None
    reason = None if stat.S_ISREG(st.st_mode) else odd_kind(st.st_mode)
    if reason is None and not utf8_name(entry.name):
        reason = BAD_NAME
    if reason is None:
        if linked is not None and st.st_nlink > 1:
            linked.add(f"{rel_dir}/{entry.name}")
        return file_stat(st)
    if odd is not None:
        odd[f"{rel_dir}/{entry.name}"] = reason
    return None


def _walk(
    root: Path,
    folder: Path,
    dirs: dict[str, int],
    odd: OddFiles | None = None,
    linked: set[str] | None = None,
) -> Iterator[tuple[str, list[tuple[str, FileStat]]]]:
    stack = [folder]
    while stack:
        current = stack.pop()
        rel_dir = current.relative_to(root).as_posix()
        opened = _open_folder(current, rel_dir, odd)
        if opened is None:
            continue
        dirs[rel_dir], scanner = opened
        if scanner is None:
            continue
        entries: list[tuple[str, FileStat]] = []
        for entry in scanner:
            name = entry.name
            if name[0] == ".":
                continue
            if entry.is_dir(follow_symlinks=False):
                if utf8_name(name):
                    stack.append(Path(entry.path))
                elif odd is not None:
                    odd[f"{rel_dir}/{name}"] = "folder name is not valid UTF-8"
            elif name.endswith(".md"):
                st = _entry(entry, rel_dir, odd, linked)
                if st is not None:
                    entries.append((name, st))
        yield rel_dir, entries


def _open_folder(
    folder: Path, rel_dir: str, odd: OddFiles | None
) -> tuple[int, list[os.DirEntry[str]] | None] | None:
    """A folder's mtime and its entries; None when it is gone. A folder this process may not list
    (chmod 000, another user's) gives no entries and goes into ``odd``: its files are skipped, never
    every read of the store failing with PermissionError."""
    try:
        mtime = os.stat(folder, follow_symlinks=False).st_mtime_ns
        with os.scandir(folder) as scanner:
            return mtime, list(scanner)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        if odd is not None:
            odd[rel_dir] = UNREADABLE_FOLDER
        try:
            return os.stat(folder, follow_symlinks=False).st_mtime_ns, None
        except OSError:
            return None
    except OSError as exc:  # a folder nested past PATH_MAX: every read of the store died on it
        if exc.errno != errno.ENAMETOOLONG:
            raise
        if odd is not None:
            odd[rel_dir] = TOO_LONG
        return None


def list_folder(
    root: Path, rel_dir: str, odd: OddFiles | None = None
) -> tuple[int, dict[str, FileStat], list[str]] | None:
    """One folder's mtime, its direct ``*.md`` files and its visible subfolders; ``None`` if gone."""
    opened = _open_folder(root / rel_dir, rel_dir, odd)
    if opened is None:
        return None
    mtime, scanner = opened
    if scanner is None:
        return mtime, {}, []
    files: dict[str, FileStat] = {}
    subdirs: list[str] = []
    for entry in scanner:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            if utf8_name(entry.name):
                subdirs.append(f"{rel_dir}/{entry.name}")
            elif odd is not None:
                odd[f"{rel_dir}/{entry.name}"] = "folder name is not valid UTF-8"
        elif entry.name.endswith(".md"):
            st = _entry(entry, rel_dir, odd)
            if st is not None:
                files[f"{rel_dir}/{entry.name}"] = st
    return mtime, files, subdirs


# A temp file this old is a dead writer's: a live one renames its temp within milliseconds.
STALE_TEMP_SECONDS = 600.0
_TEMP_PID = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-")


def _writer_gone(name: str) -> bool:
    """True when the temp name carries a writer's pid (``.tmp-<pid>-...``) and no such process runs."""
    match = _TEMP_PID.match(name)
    if match is None:
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def stale_temp_files(folders: tuple[Path, ...], older_than_seconds: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Temp files left by writers that died mid-write (never part of the truth).

    Every folder under ``folders`` is searched (pass a store's root for all its lanes). A temp
    file is stale when the pid in its name is gone, or when it is older than ``older_than_seconds``.
    """

    cutoff = time.time() - older_than_seconds
    found: list[Path] = []
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith(TEMP_PREFIX):
                    path = Path(dirpath) / name
                    try:
                        if _writer_gone(name) or path.lstat().st_mtime < cutoff:
                            found.append(path)
                    except FileNotFoundError:
                        continue
    return found

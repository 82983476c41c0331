"""The durable-write primitives (temp file, fsync, rename, fsync of the folder) and the home's
``cache/`` folder.

Standard library only: ``coffer-hook`` writes its per-session record through here on every
session start, and must not pay for the value objects and YAML that ``store.files`` imports.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from .._home import CACHE_DIR
from .scan import TEMP_PREFIX

FILE_MODE = 0o600
DIR_MODE = 0o700
CACHE_FOLDER = CACHE_DIR


def fsync_dir(path: Path) -> None:
    """fsync a folder so a create, rename or unlink in it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create ``path`` and missing parents with mode 0700, fsync'ing each new entry's parent."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue
        fsync_dir(folder.parent)


def _create_temp(folder: Path, temp_prefix: str, *, readable: bool = False) -> tuple[int, str]:
    """A new, empty temp file in ``folder`` (0600, opened for writing), as ``tempfile.mkstemp`` makes
    one: importing ``tempfile`` (``random``, ``shutil``) cost coffer-hook ~5 ms per session start.
    The pid in the name lets a later reindex remove a killed writer's temp file at once."""
    flags = (
        (os.O_RDWR if readable else os.O_WRONLY)
        | os.O_CREAT
        | os.O_EXCL
        | getattr(os, "O_CLOEXEC", 0)
        | getattr(os, "O_NOFOLLOW", 0)
    )
    while True:
        name = os.path.join(folder, f"{temp_prefix}{os.getpid()}-{os.urandom(6).hex()}.part")
        try:
            return os.open(name, flags, FILE_MODE), name
        except FileExistsError:  # 48 random bits: practically never
            continue


def atomic_write(
    path: Path,
    data: bytes,
    *,
    overwrite: bool = True,
    mode: int = FILE_MODE,
    temp_prefix: str = TEMP_PREFIX,
    before_commit: Callable[[], None] | None = None,
    sync_dir: bool = True,
) -> None:
    """Durably write ``data`` to ``path``: temp + fsync + rename + fsync(dir).

    With ``overwrite=False`` the file is linked into place and ``FileExistsError`` is raised
    if ``path`` exists, so concurrent creators can never replace each other's file.
    ``before_commit`` runs between the temp file's fsync and the rename: when it raises, the
    temp file is removed and ``path`` is left as it was (the Writer's lock fence). ``sync_dir=False``
    leaves the folder's fsync to the caller (a bulk write syncs each folder once, at its end).
    Memory files go through ``store.writer``; other callers use ``write_outside_store``.
    """
    ensure_dir(path.parent)
    fd, tmp = _create_temp(path.parent, temp_prefix)
    try:
        if mode != FILE_MODE:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if before_commit is not None:
            before_commit()
        if overwrite:
            os.replace(tmp, path)
        else:
            os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_stream(path: Path, *, mode: int = FILE_MODE, temp_prefix: str = TEMP_PREFIX) -> Iterator[BinaryIO]:
    """A temp file beside ``path`` (``mode``), opened for writing and reading; when the block ends
    it is fsync'ed and renamed over ``path``, then the folder fsync'ed: a large file written piece
    by piece, as durably as ``atomic_write``. When the block raises, the temp file is removed and
    ``path`` is left as it was."""
    fd, tmp = _create_temp(path.parent, temp_prefix, readable=True)  # a zip writer reads back
    try:
        if mode != FILE_MODE:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "r+b") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def home_cache_path(home: str | os.PathLike[str] | None, name: str) -> Path:
    """``<home>/cache/<name>``; ``home`` None is ``$COFFER_HOME`` or ``~/.coffer``. ``InvalidInput``
    when ``name`` is not one plain file name or the home is empty."""
    from .._errors import InvalidInput, safe_echo

    if not name or name != os.path.basename(name) or name in (".", ".."):
        raise InvalidInput(f"a cache file name, not a path: {safe_echo(name)!r}", field="name")
    base = home if home is not None else (os.environ.get("COFFER_HOME") or "~/.coffer")
    if not os.fspath(base).strip():  # Path("") is the current folder
        raise InvalidInput("the home is empty: name a folder, or leave it out", field="home")
    from .._home import expand_user

    return Path(os.path.abspath(expand_user(base))) / CACHE_FOLDER / name


def write_home_cache(home: str | os.PathLike[str] | None, name: str, data: bytes) -> Path:
    """Write ``data`` to ``<home>/cache/<name>`` atomically (mode 0600) and return its path.

    For what a face records to start faster next time (``coffer-mcp``'s handshake), or what
    ``coffer-hook`` gave a session, never memory: the faces write no file themselves. ``home``
    None is ``$COFFER_HOME`` or ``~/.coffer``; ``name`` is one plain file name (anything else is
    ``InvalidInput``).
    """
    target = home_cache_path(home, name)
    ensure_dir(target.parent)
    atomic_write(target, data, mode=FILE_MODE, temp_prefix=TEMP_PREFIX)
    return target


def prune_home_cache(home: str | os.PathLike[str] | None, prefix: str, max_age_seconds: float) -> int:
    """Remove the files of ``<home>/cache/`` whose name starts with ``prefix`` and that were last
    written more than ``max_age_seconds`` ago; how many were removed. A missing folder is none."""
    folder = home_cache_path(home, prefix or "x").parent
    cutoff = time.time() - max_age_seconds
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(FileNotFoundError):  # another process pruned it first
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
    if removed:
        fsync_dir(folder)
    return removed

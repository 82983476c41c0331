"""Which memory folder a team's database follows (docs/team.md, 'One folder per database').

Every process pushes its memory folder's files to the database and removes the rows of files
its folder lacks, so a member whose ``memory`` is a folder of its own would empty the index of
every fact the others wrote. The first process to use a database binds it to its memory folder:
the folder's id (``<memory>/folder.json``, made then when the folder has none) goes into
``coffer_meta``. Each later process compares its own folder's id before anything is pushed or
removed, and a folder with another id, or none, is refused with ``IndexFolderMismatch``.

A database created before folders had an id (rows, and no ``folder_id``) is adopted by the first
process whose folder holds most of the documents the database indexes; a folder holding few of
them is refused instead of binding the database to itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from ..._errors import IndexFolderMismatch, MemoryStoreNotFound
from ..._store.folder import FOLDER_FILE, FolderIdUnreadable, ensure_folder_id, read_folder_id
from ..._store.paths import StorePaths

FOLDER_KEY = "folder_id"
# Documents of an unbound database looked for in the folder before it is adopted.
ADOPT_SAMPLE = 200
# Taken while binding, so two processes starting at once bind the database once.
_BIND_LOCK = 0x636F66666572 + 1
_NOTHING = "nothing was pushed or removed"


def _short(folder_id: str) -> str:
    return folder_id[:8] + "…"


def _refused(reason: str, *, bound_to: str | None, folder_id: str | None) -> IndexFolderMismatch:
    return IndexFolderMismatch("postgresql", reason, bound_to=bound_to, folder_id=folder_id)


def bound_folder(conn: psycopg.Connection[Any]) -> str | None:
    """The id of the memory folder the database follows; None while it is unbound."""
    row = conn.execute("SELECT value FROM coffer_meta WHERE key = %s", (FOLDER_KEY,)).fetchone()
    return str(row[0]) if row is not None else None


def bind(conn: psycopg.Connection[Any], memory_dir: Path, *, writable: bool) -> str | None:
    """The folder id this database and ``memory_dir`` share, binding an unbound database to the
    folder (and giving the folder an id when it has none); ``IndexFolderMismatch`` when the
    database follows another folder. A read-only role binds nothing (it pushes nothing either)."""
    try:
        here = read_folder_id(memory_dir)
    except FolderIdUnreadable as exc:
        raise _refused(f"{exc}; {_NOTHING}", bound_to=None, folder_id=None) from None
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_BIND_LOCK,))
        bound = bound_folder(conn)
        if bound is None:
            if not writable:
                return here
            _adoptable(conn, memory_dir)
            try:
                here = ensure_folder_id(memory_dir)
            except OSError as exc:  # the folder is not there (an unmounted share behind a link)
                raise _refused(
                    f"cannot give the memory folder {memory_dir} an identity ({exc.strerror or exc}): "
                    f"is the shared folder there?; {_NOTHING}",
                    bound_to=None,
                    folder_id=None,
                ) from None
            conn.execute("INSERT INTO coffer_meta (key, value) VALUES (%s, %s)", (FOLDER_KEY, here))
            return here
    same_folder(memory_dir, bound, here)
    return here


def same_folder(memory_dir: Path, bound: str, here: str | None = None) -> None:
    """``IndexFolderMismatch`` unless ``memory_dir`` (whose id is ``here``, read when None) is the
    folder ``bound``: also asked before each write, so a link re-pointed (or a share unmounted)
    while a process runs is refused too."""
    if here is None:
        try:
            here = read_folder_id(memory_dir)
        except FolderIdUnreadable as exc:
            raise _refused(f"{exc}; {_NOTHING}", bound_to=bound, folder_id=None) from None
    if here != bound:
        raise _refused(_mismatch(memory_dir, bound, here), bound_to=bound, folder_id=here)


def _mismatch(memory_dir: Path, bound: str, here: str | None) -> str:
    fix = (
        f"point this home's memory at the team's shared folder (e.g. ln -s /mnt/team/coffer-memory "
        f"{memory_dir}), or give this folder a database of its own; {_NOTHING}"
    )
    if here is None:
        return (
            f"this database follows the memory folder {_short(bound)}, and {memory_dir} has no "
            f"{FOLDER_FILE} (a new, empty or unsynced folder: a synced copy of the team's folder "
            f"carries it, so sync or pull it first; in a git repository, commit {FOLDER_FILE}): {fix}"
        )
    return (
        f"this database follows the memory folder {_short(bound)}, not {memory_dir} "
        f"({_short(here)}, another folder): {fix}"
    )


def _adoptable(conn: psycopg.Connection[Any], memory_dir: Path) -> None:
    """Refuse to bind a database that indexes documents before folder ids (an older coffer's)
    when most of them are not files of ``memory_dir``: it would remove the others' rows."""
    rows = conn.execute(
        "SELECT store, path FROM coffer_documents ORDER BY random() LIMIT %s", (ADOPT_SAMPLE,)
    ).fetchall()
    if not rows:
        return
    here = sum(1 for store, path in rows if _present(memory_dir, str(store), str(path)))
    if here * 2 >= len(rows):
        return
    raise _refused(
        f"this database indexes documents written before it was bound to one memory folder, and "
        f"{len(rows) - here} of {len(rows)} sampled are not in {memory_dir}: point this home's memory "
        "at the team's shared folder (its first process binds the database), or give this folder a "
        f"database of its own; {_NOTHING}",
        bound_to=None,
        folder_id=None,
    )


def _present(memory_dir: Path, store: str, path: str) -> bool:
    try:
        return (StorePaths.of(memory_dir, store).root / path).is_file()
    except MemoryStoreNotFound:
        return False

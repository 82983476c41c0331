"""The memory folder's identity, ``<memory>/folder.json``: which folder a shared index follows.

A team's PostgreSQL index is bound to one memory folder (docs/team.md). The folder names itself
by a random id kept in this file, so the same folder reached through a symbolic link, another
mount path or a git clone is recognised by its content, never by its path. The file is written
once (created, never replaced: a git pull finds it unchanged, so it can be committed) and
otherwise only read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .durable import atomic_write, ensure_dir
from .files import read_bytes

FOLDER_FILE = "folder.json"
FORMAT = 1
# A folder id is 32 lowercase hex digits (128 random bits).
_ID_LENGTH = 32


class FolderIdUnreadable(ValueError):
    """``folder.json`` is there but is not one coffer wrote (the message says what is wrong)."""


def folder_file(memory_dir: Path) -> Path:
    """Where the memory folder's identity is kept."""
    return memory_dir / FOLDER_FILE


def read_folder_id(memory_dir: Path) -> str | None:
    """The folder's id; None when it has none yet (or the folder is not there).
    ``FolderIdUnreadable`` when the file is damaged, a link, or not a regular file."""
    path = folder_file(memory_dir)
    try:
        data, _ = read_bytes(path, max_bytes=4096)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:  # a symbolic link (ELOOP), a folder, a FIFO, too large...
        raise FolderIdUnreadable(f"{path}: {exc.strerror or exc}") from None
    try:
        found = json.loads(data)
        value = found["id"] if isinstance(found, dict) else None
    except (ValueError, KeyError):
        value = None
    if not isinstance(value, str) or len(value) != _ID_LENGTH or value.strip("0123456789abcdef"):
        raise FolderIdUnreadable(f'{path} holds no folder id coffer wrote ({{"format": 1, "id": <32 hex>}})')
    return value


def ensure_folder_id(memory_dir: Path) -> str:
    """The folder's id, made (and written durably, 0600) when it has none. Two processes making
    one at once agree: the file is created, never replaced, and the loser reads the winner's."""
    found = read_folder_id(memory_dir)
    if found is not None:
        return found
    ensure_dir(memory_dir)
    made = os.urandom(_ID_LENGTH // 2).hex()
    data = json.dumps({"format": FORMAT, "id": made}).encode() + b"\n"
    try:
        atomic_write(folder_file(memory_dir), data, overwrite=False)
    except FileExistsError:
        again = read_folder_id(memory_dir)
        if again is not None:
            return again
        raise
    return made

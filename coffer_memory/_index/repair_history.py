"""``index.db.repairs``: the index's repair history, kept beside it.

Each repair moves the damaged index aside and builds a new one; the history noted inside the
index (its ``kv`` row) went with the moved file, so ``coffer doctor`` listed the last repair only.
The file beside it outlives every index; it is written whole (``write_outside_store``) under the
repair lock, and holds the last ``KEEP`` lines.
"""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path

from .._store.files import write_outside_store

KEEP = 20


def history(index: Path) -> Path:
    """The history file of the index at ``index``."""
    return index.with_name(f"{index.name}.repairs")


def read(index: Path) -> list[str]:
    """The repairs kept beside the index, oldest first (none: no file yet, or one not ours)."""
    try:
        found = json.loads(history(index).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [str(line) for line in found] if isinstance(found, list) else []


def keep(index: Path, line: str) -> None:
    """Add ``line`` to the history (the caller holds the repair lock). A history that cannot be
    written must not stop the repair: the index's own note still says it."""
    data = json.dumps([*read(index), line][-KEEP:]).encode()
    with suppress(OSError):
        write_outside_store(history(index), data, mode=0o600, temp_prefix=".index-repairs-")


def merged(index: Path, noted: list[str]) -> list[str]:
    """The history beside the index with ``noted`` (the index's own note: a home whose repairs came
    before the file), oldest first (each line begins with its repair's UTC time), the last ``KEEP``."""
    return sorted(set(noted) | set(read(index)))[-KEEP:]

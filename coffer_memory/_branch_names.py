"""Earlier names of a git branch, read from its reflog.

``git branch -m old new`` moves the branch's reflog to the new name and appends a line whose
message is ``Branch: renamed refs/heads/old to refs/heads/new``, so the reflog of a branch tells
every name it had. A handoff is saved under the branch's name of the time; ``resume`` on the
renamed branch finds it through these names. Read from the files, like the rest of ``_scope``: no
``git`` subprocess. A reftable repository keeps no ``logs/`` folder: there the answer is empty.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from ._scope import _read_text, shown_branch

# Where git keeps branch reflogs in the common dir (one path: "logs" alone is coffer's own home
# folder's name, which only _home spells).
_REFLOGS = "logs/refs/heads"
_STAMP = re.compile(r" (\d{1,11}) [+-]\d{4}$")
_RENAMED = re.compile(r"\tBranch: renamed refs/heads/(.+) to refs/heads/(.+)$")
# A branch renamed back and forth keeps each name once; more than this many is no one's history.
_MAX_NAMES = 20
# Branch reflogs read when listing every renamed branch (``renamed_branches``): a bound on the work
# of a ``handoff show`` in a repository of many thousands of branches, past what anyone renames.
_MAX_BRANCHES = 2000


def _common_dir(gitdir: Path) -> Path:
    """The repository's common git dir (where branch reflogs live) for a worktree's gitdir."""
    common = _read_text(gitdir / "commondir")
    if common is None:
        return gitdir
    path = Path(common)
    return Path(os.path.realpath(path if path.is_absolute() else gitdir / path))


def earlier_names(gitdir: Path, branch: str) -> list[tuple[str, datetime]]:
    """The names ``branch`` had before it was renamed, the most recent first (as coffer keeps
    branch names: ``shown_branch``), each with the time it was renamed away from. Empty when it
    was never renamed, has no reflog, or its name is not UTF-8 (kept with ``\\xNN``, no path)."""
    if "\\" in branch:
        return []
    text = _read_text(_common_dir(gitdir) / _REFLOGS / branch)
    if not text:
        return []
    names: list[tuple[str, datetime]] = []
    current = branch
    for line in reversed(text.splitlines()):
        found = _RENAMED.search(line)
        if found is None or found.group(2) != current:
            continue
        current = found.group(1)
        name, when = shown_branch(current), _when(line)
        if when is not None and name != branch and name not in (n for n, _ in names):
            names.append((name, when))
        if len(names) >= _MAX_NAMES:
            break
    return names


def _when(line: str) -> datetime | None:
    """The time of a reflog line: ``<old> <new> <who> <seconds> <zone>\t<message>``."""
    stamp = _STAMP.search(line.partition("\t")[0])
    return datetime.fromtimestamp(int(stamp.group(1)), UTC) if stamp else None


def renamed_branches(gitdir: Path) -> dict[str, list[tuple[str, datetime]]]:
    """Every branch of the repository that was renamed, with its earlier names (``earlier_names``),
    found by reading each branch's reflog (at most ``_MAX_BRANCHES`` of them). Empty in a
    reftable repository (no ``logs/`` folder)."""
    root = _common_dir(gitdir) / _REFLOGS
    out: dict[str, list[tuple[str, datetime]]] = {}
    read = 0
    for folder, _dirs, files in os.walk(root):  # a "/" in a branch's name is a folder here
        for file in files:
            if read >= _MAX_BRANCHES:
                return out
            read += 1
            branch = Path(folder, file).relative_to(root).as_posix()
            names = earlier_names(gitdir, branch)
            if names:
                out[branch] = names
    return out

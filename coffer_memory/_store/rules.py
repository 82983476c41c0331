"""Reading the rules lane: kept apart from ``lanes`` so that ``coffer-hook`` can read rules
without importing the YAML and frontmatter stack."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .paths import StorePaths

__all__ = ["IMPORT_MARK", "read_rules", "rules_files"]

# How an imported rules file starts: its provenance, an HTML comment (``porting.apply`` writes it;
# the session-start bundle leaves these lines out, they are not for the agent).
IMPORT_MARK = "<!-- coffer-import "


def rules_files(sp: StorePaths) -> list[Path]:
    """``rules/rules.md`` first, then the per-topic rules files by name (regular files only: a
    symbolic link, or a ``rules/`` folder that is one, is never followed)."""
    if sp.rules.is_symlink() or not sp.rules.is_dir():
        return []
    files = sorted(p for p in sp.rules.glob("*.md") if not p.name.startswith(".") and _is_regular(p))
    main = sp.rules_file()
    return ([main] if main in files else []) + [p for p in files if p != main]


def read_rules(sp: StorePaths) -> tuple[str, list[Path]]:
    """Every rules file's text, concatenated in reading order."""
    files = rules_files(sp)
    texts = []
    for path in files:
        try:
            texts.append(_read_no_follow(path).decode("utf-8", errors="replace").strip())
        except OSError:  # gone, or swapped for a link since it was listed
            continue
    return "\n\n".join(t for t in texts if t), files


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _read_no_follow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)

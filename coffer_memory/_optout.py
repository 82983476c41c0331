"""Per-project opt-out: repositories where coffer's automation stays out.

A repository opts out with a file named ``.coffer-optout`` at its top level (any content; commit it
to opt out for everyone, or keep it untracked for yourself), or by matching a pattern of
``[projects] exclude`` in ``config.toml`` (``COFFER_PROJECTS_EXCLUDE``, comma-separated). A
pattern is a path or an ``fnmatch`` glob (``~`` expanded); it matches the repository's folder or
any folder above it, for the main checkout and for the worktree in use.

What stops: the session-start bundle (the hook prints nothing), session-end distillation and
sweeps (those sessions are skipped). What keeps working: anything asked for on purpose
(``coffer remember``, recall, the MCP tools an agent calls, REST, Python).

A light module (stdlib only): ``coffer-hook`` checks it on every session start.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from ._home import HomeLayout, read_config_text
from ._scope import find_git

OPTOUT_FILE = ".coffer-optout"
EXCLUDE_ENV = "COFFER_PROJECTS_EXCLUDE"


class OptOut(NamedTuple):
    """Why a repository is opted out."""

    root: Path
    """The repository's (main checkout's) top-level folder."""
    source: str
    """The ``.coffer-optout`` file's path, or ``[projects] exclude`` and the matching pattern."""

    def describe(self) -> str:
        """One line for a person."""
        return f"{self.root}: opted out by {self.source}"


def exclude_patterns(home: Path) -> list[str]:
    """``[projects] exclude`` as ``Settings`` reads it (environment first), without pydantic.

    For ``coffer-hook``, which must start fast; a ``config.toml`` that does not parse, or is no
    file, raises ``ValueError`` (the hook then stays silent, as for any failure).
    """
    raw = os.environ.get(EXCLUDE_ENV)
    if raw:
        return [p.strip() for p in raw.split(",") if p.strip()]
    text = read_config_text(HomeLayout(home).config)  # never blocks on a FIFO
    if text is None:
        return []
    data = tomllib.loads(text)
    projects = data.get("projects")
    patterns = projects.get("exclude", []) if isinstance(projects, dict) else []
    return [str(p) for p in patterns] if isinstance(patterns, list) else []


def _matches(folder: Path, pattern: str) -> bool:
    expanded = os.path.expanduser(pattern.strip())
    if not expanded:
        return False
    if not any(c in expanded for c in "*?["):
        expanded = os.path.realpath(expanded)
    expanded = expanded.rstrip("/") or "/"
    return any(fnmatch.fnmatchcase(str(f), expanded) for f in (folder, *folder.parents))


def optout_for_roots(roots: Iterable[Path], patterns: Sequence[str]) -> OptOut | None:
    """The opt-out of a repository checked out at ``roots`` (main checkout first), if any."""
    folders = list(dict.fromkeys(roots))
    if not folders:
        return None
    for folder in folders:
        marker = folder / OPTOUT_FILE
        if os.path.lexists(marker):
            return OptOut(folders[0], str(marker))
    for folder in folders:
        for pattern in patterns:
            if _matches(folder, pattern):
                return OptOut(folders[0], f"[projects] exclude {pattern!r}")
    return None


def optout_for(cwd: str | os.PathLike[str] | None, patterns: Sequence[str]) -> OptOut | None:
    """The opt-out of the repository holding ``cwd``; None outside a repository or when it takes part."""
    if cwd is None:
        return None
    git = find_git(cwd)
    if git is None:
        return None
    return optout_for_roots((git.toplevel, git.worktree), patterns)


__all__ = ["EXCLUDE_ENV", "OPTOUT_FILE", "OptOut", "exclude_patterns", "optout_for", "optout_for_roots"]

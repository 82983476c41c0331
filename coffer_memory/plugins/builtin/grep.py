"""Built-in grep backends: ripgrep (when ``rg`` is found) and a pure-Python fallback."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from ..._store.files import utf8_name
from ..hookspecs import GrepBackend, GrepMatch, hookimpl

MAX_LINES_PER_FILE = 50


def _which_patterns(line: str, lowered: Sequence[str]) -> frozenset[int]:
    folded = line.lower()
    return frozenset(i for i, p in enumerate(lowered) if p in folded)


@cache
def find_ripgrep() -> str | None:
    """``rg`` on PATH, else the one the PyPI ``ripgrep`` wheel put beside this interpreter."""
    found = shutil.which("rg")
    if found:
        return found
    import sysconfig  # slow to import, and only needed when rg is not on PATH

    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(folder, "rg")
        if os.access(candidate, os.X_OK):
            return candidate
    return None


class RipgrepBackend:
    """Runs ``rg --json --fixed-strings --ignore-case`` over the recall folders."""

    name = "ripgrep"
    priority = 100

    def available(self) -> bool:
        """True when an ``rg`` binary is found."""
        return find_ripgrep() is not None

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Matching lines, decoded from rg's JSON stream (text or base64 bytes)."""
        existing = [str(f) for f in folders if f.is_dir()]
        rg = find_ripgrep()
        if not existing or not patterns or rg is None:
            return []
        args = [
            rg,
            "--json",
            "--fixed-strings",
            "--ignore-case",
            "--hidden",
            "--no-ignore",
            "--no-follow",
            "--glob",
            "*.md",
            "--glob",
            "!.*",
            "--no-messages",
            # A file needs only a few matching lines to show which patterns it holds; this
            # bounds the JSON to parse on common words.
            "--max-count",
            str(MAX_LINES_PER_FILE),
        ]
        for pattern in patterns:
            args += ["-e", pattern]
        proc = subprocess.run([*args, "--", *existing], capture_output=True, check=False, timeout=60)
        lowered = [p.lower() for p in patterns]
        matches: list[GrepMatch] = []
        for raw in proc.stdout.splitlines():
            event = json.loads(raw)
            if event.get("type") != "match":
                continue
            data = event["data"]
            path = _decode(data["path"])
            line = _decode(data["lines"]).rstrip("\r\n")
            matches.append(
                GrepMatch(Path(path), int(data["line_number"]), line, _which_patterns(line, lowered))
            )
            if len(matches) >= max_lines:
                break
        return matches


def _decode(field: dict[str, str]) -> str:
    if "text" in field:
        return field["text"]
    return base64.b64decode(field["bytes"]).decode("utf-8", errors="replace")


class PythonGrepBackend:
    """Reads the files in Python: slower, always available."""

    name = "python"
    priority = 10

    def available(self) -> bool:
        """Always true."""
        return True

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Matching lines of visible ``*.md`` files, symlinks not followed."""
        lowered = [p.lower() for p in patterns]
        matches: list[GrepMatch] = []
        for folder in folders:
            for dirpath, dirnames, filenames in os.walk(folder):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    if name.startswith(".") or not name.endswith(".md"):
                        continue
                    path = Path(dirpath) / name
                    text = _read_regular(path)
                    if text is None:
                        continue
                    found = 0
                    for number, line in enumerate(text.splitlines(), start=1):
                        which = _which_patterns(line, lowered)
                        if which:
                            matches.append(GrepMatch(path, number, line, which))
                            found += 1
                            if found >= MAX_LINES_PER_FILE:
                                break
                            if len(matches) >= max_lines:
                                return matches
        return matches


def _read_regular(path: Path) -> str | None:
    """The text of a regular file with a UTF-8 name; None for a symlink, FIFO, device or odd name.

    Opened non-blocking: a FIFO named ``*.md`` would otherwise block the reader forever.
    """
    if not utf8_name(path.name):
        return None  # the index cannot hold its path, so no hit could name it
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return handle.read().decode("utf-8", errors="replace")


@hookimpl
def register_grep_backends(register: Callable[[GrepBackend], None]) -> None:
    """Register the two built-in grep backends."""
    register(RipgrepBackend())
    register(PythonGrepBackend())

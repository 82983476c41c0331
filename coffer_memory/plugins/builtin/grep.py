"""Built-in grep backends: ripgrep (when ``rg`` is found) and a pure-Python fallback."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from functools import cache
from itertools import accumulate
from pathlib import Path

from ..._store.scan import utf8_name
from ..._store.watch import FolderFeed, under, walkable
from ..hookspecs import GrepBackend, GrepMatch, hookimpl

MAX_LINES_PER_FILE = 50
# The pure-Python backend keeps files' texts up to these sizes (characters of the text; it keeps the
# text, its lowercased copy and, once searched, that copy without key lines: up to 3 copies).
CACHE_FILE_CHARS = 256 * 1024
CACHE_CHARS = 32 * 1024 * 1024
# What rg searches and how: fixed strings, any case, every visible *.md whatever ignore files
# or a user's rg config say, no symlink followed (bench/limit.py's limit walks the same way).
RG_SEARCH_FLAGS = (
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
    "--no-config",
)
# A file whose ctime is this recent may change again unseen within the same clock tick.
RACY_NS = 2_000_000_000
# The feed vouches for kept texts at most this long after the walk that verified it; then a search
# walks (one lstat per file) again. A write through a hard link made after that walk, outside the
# watched folders, raises no event: the reconciler's periodic full scan has the same bound.
REWALK_NS = 60_000_000_000


Held = dict[str, frozenset[int]]


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
    """Runs one ``rg --fixed-strings --ignore-case`` over all the folders searched."""

    name = "ripgrep"
    priority = 100

    def available(self) -> bool:
        """True when an ``rg`` binary is found."""
        return find_ripgrep() is not None

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Matching lines, read from rg's plain ``path NUL number:line`` output.

        Plain lines, not ``--json``: decoding a JSON event per matching line was a fifth of a
        grep recall at 10k facts (thousands of lines for a common word).
        """
        output = self._run(folders, patterns, ["--no-heading", "--line-number"])
        return _parse_lines(output, [p.lower() for p in patterns], max_lines) if output else []

    def held(self, folders: Sequence[Path], patterns: Sequence[str], *, skip: re.Pattern[str]) -> Held:
        """Per file, the patterns its matching lines hold, leaving out lines ``skip`` matches.

        The same as folding ``search``'s lines (``skip.match(line)`` lines left out), without a
        Python object per line: rg prints each file's lines under one heading (``path NUL
        line\nline\n\n``), the skipped lines are blanked in one regex pass over the whole
        output, and each file's block is lowercased and searched once per pattern.
        """
        output = self._run(folders, patterns, ["--heading", "--no-line-number"])
        if not output:
            return {}
        lowered = [p.lower() for p in patterns]
        # A NUL, not an empty line: blank lines separate the files' blocks, and no pattern
        # holds a NUL (recall refuses such a query; rg could not take it as an argument).
        text = _blank_lines(skip).sub("\\1\0", output.decode("utf-8", errors="replace"))
        found: Held = {}
        for block in text.split("\n\n"):
            name, nul, lines = block.partition("\0")
            # A file whose every line was skipped is not there; one whose lines match by rg's
            # case folding but not Python's is, holding no pattern (as folding ``search`` gives).
            if nul and lines.strip("\0\n"):
                folded = lines.lower()
                found[name] = frozenset(i for i, p in enumerate(lowered) if p in folded)
        return found

    def _run(self, folders: Sequence[Path], patterns: Sequence[str], layout: Sequence[str]) -> bytes:
        """rg's output for ``patterns`` over the existing ``folders`` (empty when nothing to do)."""
        existing = [str(f) for f in folders if f.is_dir()]
        rg = find_ripgrep()
        if not existing or not patterns or rg is None:
            return b""
        args = [
            rg,
            *RG_SEARCH_FLAGS,
            "--with-filename",
            "--null",
            "--color",
            "never",
            # A file needs only a few matching lines to show which patterns it holds; this
            # bounds the output to read on common words.
            "--max-count",
            str(MAX_LINES_PER_FILE),
            *layout,
        ]
        for pattern in patterns:
            args += ["-e", pattern]
        proc = subprocess.run([*args, "--", *existing], capture_output=True, check=False, timeout=60)
        return proc.stdout


@cache
def _blank_lines(skip: re.Pattern[str]) -> re.Pattern[str]:
    """``skip`` (matched at a line's start) as one pass over rg's headed output: after each line
    break or file name's NUL, to the line's end (replace with ``\\1`` and a NUL). Starting
    with that character lets the regex engine skip ahead to it (``^`` under MULTILINE or a
    lookbehind tried every position: 4x slower). A match cannot run into the next line, for
    every line rg prints holds a pattern (so is not all whitespace); the output never starts
    with a skipped line, for it starts with a file name."""
    body = skip.pattern.removeprefix("^")
    return re.compile(f"([\\n\\0])(?:{body})[^\\n]*", skip.flags)


def _parse_lines(output: bytes, lowered: Sequence[str], max_lines: int) -> list[GrepMatch]:
    """``GrepMatch``es of rg's ``--null --line-number`` lines (one Path per file, not per line)."""
    paths: dict[bytes, Path] = {}
    matches: list[GrepMatch] = []
    for raw in output.split(b"\n"):
        name, nul, rest = raw.partition(b"\0")
        number, colon, text = rest.partition(b":")
        if not nul or not colon or not number.isdigit():
            continue  # the empty tail, or anything that is not a match line
        path = paths.get(name)
        if path is None:
            path = paths[name] = Path(name.decode("utf-8", errors="replace"))
        line = text.decode("utf-8", errors="replace").rstrip("\r")
        matches.append(GrepMatch(path, int(number), line, _which_patterns(line, lowered)))
        if len(matches) >= max_lines:
            break
    return matches


class PythonGrepBackend:
    """Reads the files in Python: slower, always available.

    A file's text is kept (lowercased too) while its size, times and inode stay the same, so a
    later search of an unchanged file costs one ``lstat`` instead of open, read, decode and
    lowercase; a file changed within ``RACY_NS`` is not kept (an edit in the same clock tick
    would look unchanged). At most ``CACHE_CHARS`` characters are kept.
    """

    name = "python"
    priority = 10

    def __init__(self) -> None:
        self._texts: dict[str, tuple[tuple[int, int, int, int], str, str]] = {}
        self._chars = 0
        self._watched = _Watched(self._forget)
        self._keep = threading.Lock()  # keeping a text against forgetting one
        self._forgotten = 0  # texts forgotten on the feed's word so far
        # Per kept file and ``skip``: its lowercased lines that ``skip`` leaves, or None when
        # the file has more lines than MAX_LINES_PER_FILE (then the first matching ones count).
        self._visible: dict[tuple[str, re.Pattern[str]], tuple[str, str | None]] = {}

    def available(self) -> bool:
        """Always true."""
        return True

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Matching lines of visible ``*.md`` files, symlinks not followed.

        Each file is lowercased whole and its patterns found with ``str.find``; only the lines
        holding one are split out (a loop over every line of every file was 4/5 of the time).
        """
        lowered = [p.lower() for p in patterns]
        matches: list[GrepMatch] = []
        for folder in folders:
            for dirpath, dirnames, filenames in os.walk(folder):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                base: Path | None = None
                for name in sorted(filenames):
                    if name.startswith(".") or not name.endswith(".md"):
                        continue
                    texts = self._text(os.path.join(dirpath, name), name)
                    if texts is None:
                        continue
                    found = _matching_lines(*texts, lowered)
                    if not found:
                        continue
                    base = base or Path(dirpath)
                    path = base / name
                    for number, line, which in found:
                        matches.append(GrepMatch(path, number, line, which))
                        if len(matches) >= max_lines:
                            return matches
        return matches

    def held(self, folders: Sequence[Path], patterns: Sequence[str], *, skip: re.Pattern[str]) -> Held:
        """Per file, the patterns its matching lines hold, leaving out lines ``skip`` matches.

        The same as folding ``search``'s lines, without splitting out lines: a file of at most
        ``MAX_LINES_PER_FILE`` lines holds a pattern when its lowercased text without the
        skipped lines does (kept beside the file's text, so a later search of an unchanged
        file is one ``lstat`` and a substring test per pattern).
        """
        lowered = [p.lower() for p in patterns]
        found: Held = {}
        groups: dict[str, list[str]] = {}
        for folder in folders:
            parent, name = os.path.split(os.path.abspath(folder))
            groups.setdefault(parent, []).append(name)
        for parent, names in groups.items():
            listing = self._watched.listing(parent, names)
            if listing is None:
                epoch = self._watched.start(parent, names)
                walked = {name: self._held_walk(f"{parent}/{name}", lowered, skip, found) for name in names}
                self._watched.finish(parent, walked, epoch)
                continue
            kept = self._texts
            for path in listing:  # the feed vouches for every kept text here: no lstat
                entry = kept.get(path)
                texts = (
                    (entry[1], entry[2]) if entry is not None else self._text(path, path.rsplit("/", 1)[1])
                )
                if texts is not None:
                    self._hold(path, *texts, lowered, skip, found)
        return found

    def _hold(
        self, path: str, text: str, folded: str, lowered: Sequence[str], skip: re.Pattern[str], found: Held
    ) -> None:
        for p in lowered:
            if p in folded:
                seen = self._held_in(path, text, folded, lowered, skip)
                if seen:
                    found[path] = seen
                return

    def _held_walk(self, folder: str, lowered: Sequence[str], skip: re.Pattern[str], found: Held) -> set[str]:
        """``held`` over one folder by walking it, one ``lstat`` per file; the visible ``*.md`` paths."""
        kept = self._texts
        visible: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            prefix = dirpath + os.sep
            for name in filenames:
                if name.startswith(".") or not name.endswith(".md"):
                    continue
                path = prefix + name
                visible.add(path)
                # The kept text's check inline: this loop runs once per file of every store.
                entry = kept.get(path)
                try:
                    st = os.stat(path, follow_symlinks=False)
                except OSError:
                    continue
                if entry is not None and entry[0] == _stat_key(st):
                    text, folded = entry[1], entry[2]
                else:
                    texts = self._text(path, name)
                    if texts is None:
                        continue
                    text, folded = texts
                self._hold(path, text, folded, lowered, skip, found)
        return visible

    def close(self) -> None:
        """Release the inotify fd of the folders it watches."""
        self._watched.close()

    def _forget(self, path: str) -> None:
        """Drop the kept text of a file the feed says changed."""
        with self._keep:
            self._forgotten += 1
            old = self._texts.pop(path, None)
            if old is not None:
                self._chars -= len(old[1])

    def _held_in(
        self, path: str, text: str, folded: str, lowered: Sequence[str], skip: re.Pattern[str]
    ) -> frozenset[int]:
        kept = self._visible.get((path, skip))
        if kept is None or kept[0] is not folded:
            lines = text.splitlines()
            visible = None
            if len(lines) <= MAX_LINES_PER_FILE:
                visible = "\n".join(line for line in lines if not skip.match(line)).lower()
            kept = (folded, visible)
            if self._texts.get(path, (None, None, None))[2] is folded:  # only beside a kept text
                self._visible[(path, skip)] = kept
        if kept[1] is not None:
            return frozenset(i for i, p in enumerate(lowered) if p in kept[1])
        found = _matching_lines(text, folded, lowered)
        return frozenset(i for _, line, which in found if not skip.match(line) for i in which)

    def _text(self, path: str, name: str) -> tuple[str, str] | None:
        """A regular file's text and its lowercased text (kept while the file is unchanged)."""
        if not utf8_name(name):
            return None  # the index cannot hold its path, so no hit could name it
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        key = _stat_key(st)
        kept = self._texts.get(path)
        if kept is not None and kept[0] == key:
            return kept[1], kept[2]
        forgotten = self._forgotten
        text = _read_regular(path)
        if text is None:
            return None
        folded = text.lower()
        # A file with another hard link may change through it with no event for this name: kept,
        # a vouched search would trust its text without looking at the file.
        if time.time_ns() - st.st_ctime_ns > RACY_NS and len(text) <= CACHE_FILE_CHARS and st.st_nlink == 1:
            with self._keep:
                # A text read before the feed said its file changed must not outlive that news: a
                # vouched search trusts kept texts without looking at the file.
                if forgotten != self._forgotten:
                    return text, folded
                if self._chars + len(text) > CACHE_CHARS:
                    self._texts.clear()
                    self._visible.clear()
                    self._chars = 0
                old = self._texts.pop(path, None)
                self._chars += len(text) - (len(old[1]) if old is not None else 0)
                self._texts[path] = (key, text, folded)
        return text, folded


class _Watched:
    """The visible ``*.md`` files of the folders a ``PythonGrepBackend`` searched, kept while an
    inotify feed (``_store/watch.py``) vouches for them, so that a search trusts each kept text
    without its ``lstat`` and re-reads only the files the feed named.

    A folder's parent is armed on its second search (a short-lived process such as the CLI
    searches once and never watches) and vouched for from the end of the walk that follows; an
    overflow, a failed watch, the parent moved or a fork make the next search walk again.
    """

    def __init__(self, forget: Callable[[str], None]) -> None:
        self._forget = forget
        self._feed: FolderFeed | None = None
        self._guard = threading.Lock()
        self._searches: dict[str, int] = {}  # parent -> walks so far
        self._tops: dict[str, frozenset[str]] = {}  # parent -> the folder names armed under it
        self._files: dict[str, set[str]] = {}  # folder -> its visible *.md paths
        self._built: dict[str, int] = {}  # folder -> the epoch its files were walked at
        self._walked: dict[str, int] = {}  # parent -> when (time.monotonic_ns) its last walk started

    def listing(self, parent: str, names: Sequence[str]) -> list[str] | None:
        """The files of ``names`` under ``parent`` when the feed vouches for all of them, else None."""
        with self._guard:
            feed = self._feed
            if feed is None or parent not in self._tops:
                return None
            if time.monotonic_ns() - self._walked.get(parent, 0) > REWALK_NS:
                return None
            news = feed.news(parent)
            epoch = feed.epoch(parent)
            if news is None or epoch is None:
                return None
            files, trees = news
            for rel in files:
                path = f"{parent}/{rel}"
                self._forget(path)
                held = self._files.get(f"{parent}/{rel.split('/', 1)[0]}")
                if held is not None:
                    if os.path.lexists(path) and not os.path.isdir(path):
                        held.add(path)
                    else:
                        held.discard(path)
            for tree in sorted(trees):
                feed.rewatch(parent, tree)  # before the walk: what changes after it is news again
                folder = f"{parent}/{tree}"
                held = self._files.get(f"{parent}/{tree.split('/', 1)[0]}")
                if held is None:
                    continue
                for path in [p for p in held if under(p, folder)]:
                    held.discard(path)
                    self._forget(path)
                if not walkable(parent, tree):
                    continue
                for dirpath, dirnames, filenames in os.walk(folder):
                    dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                    for name in filenames:
                        if not name.startswith(".") and name.endswith(".md"):
                            self._forget(f"{dirpath}/{name}")
                            held.add(f"{dirpath}/{name}")
            if feed.epoch(parent) != epoch:  # a rewatch failed: walk again
                return None
            out: list[str] = []
            for name in names:
                folder = f"{parent}/{name}"
                if self._built.get(folder) != epoch:
                    return None
                out.extend(self._files[folder])
            return out

    def start(self, parent: str, names: Sequence[str]) -> int | None:
        """Before a walk of ``names`` under ``parent``: arm it from its second walk on; the epoch the
        walk then verifies, or None."""
        with self._guard:
            self._walked[parent] = time.monotonic_ns()
            self._searches[parent] = walks = self._searches.get(parent, 0) + 1
            if walks < 2:
                return None
            if self._feed is None:
                self._feed = FolderFeed()
            tops = self._tops.get(parent, frozenset()) | frozenset(names)
            if self._feed.status(parent) == "off" or tops != self._tops.get(parent):
                self._tops[parent] = tops
                self._feed.arm(parent, parent, tops, accept=lambda rel: rel.endswith(".md"))
            return self._feed.epoch(parent)

    def finish(self, parent: str, walked: dict[str, set[str]], epoch: int | None) -> None:
        """After the walk: keep its files; the feed vouches from now on if nothing moved meanwhile."""
        if epoch is None:
            return
        with self._guard:
            assert self._feed is not None
            for name, files in walked.items():
                self._files[f"{parent}/{name}"] = files
                self._built[f"{parent}/{name}"] = epoch
            self._feed.verify(parent, epoch)

    def close(self) -> None:
        """Release the feed's fd, and the listings it vouched for (a new feed counts its epochs
        from 1 again: one of them must not pass for the closed feed's)."""
        with self._guard:
            if self._feed is not None:
                self._feed.close()
                self._feed = None
            self._files.clear()
            self._built.clear()


def _stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """What a kept text is checked against: inode, size, mtime and ctime (ctime catches an edit
    that puts size and mtime back)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _matching_lines(text: str, folded: str, lowered: Sequence[str]) -> list[tuple[int, str, frozenset[int]]]:
    """The first ``MAX_LINES_PER_FILE`` lines (as ``str.splitlines`` cuts them) holding any
    of the lowercased patterns: (1-based number, line, which patterns)."""
    held = [(i, p) for i, p in enumerate(lowered) if p in folded]
    if not held:
        return []
    # No pattern holds a line break (queries are whitespace-normalised), so each occurrence
    # lies inside one line; lowercasing keeps the lines (it may change their lengths).
    starts = list(accumulate(map(len, folded.splitlines(keepends=True)), initial=0))
    per_line: dict[int, set[int]] = {}
    for i, p in held:
        at = folded.find(p)
        while at != -1:
            line = bisect_right(starts, at) - 1
            per_line.setdefault(line, set()).add(i)
            at = folded.find(p, starts[line + 1])
    lines = text.splitlines()
    first = sorted(per_line)[:MAX_LINES_PER_FILE]
    return [(n + 1, lines[n], frozenset(per_line[n])) for n in first]


def _read_regular(path: str) -> str | None:
    """The text of a regular file; None for a symlink, FIFO or device.

    Opened non-blocking: a FIFO named ``*.md`` would otherwise block the reader forever.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        data = os.read(fd, st.st_size + 1)  # a short read is the end of a regular file
        if len(data) > st.st_size:  # it grew since fstat: read the rest
            chunks = [data]
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            data = b"".join(chunks)
        return data.decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


@hookimpl
def register_grep_backends(register: Callable[[GrepBackend], None]) -> None:
    """Register the two built-in grep backends."""
    register(RipgrepBackend())
    register(PythonGrepBackend())

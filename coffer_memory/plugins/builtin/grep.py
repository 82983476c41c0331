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

from ..._grep_fold import fold, rg_patterns
from ..._store.scan import utf8_name
from ..hookspecs import GrepBackend, GrepMatch, hookimpl
from ._grep_texts import Corpus, Watched

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


Held = dict[str, frozenset[int]]


def _which_patterns(line: str, lowered: Sequence[str]) -> frozenset[int]:
    folded = fold(line)
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
        return _parse_lines(output, [fold(p) for p in patterns], max_lines) if output else []

    def held(self, folders: Sequence[Path], patterns: Sequence[str], *, skip: re.Pattern[str]) -> Held:
        """Per file, the patterns its matching lines hold once ``skip``'s match at each line's
        start is cut; a file holding none is left out.

        The same as folding ``search``'s lines (cut the same way), without a Python object per
        line: rg prints each file's lines under one heading (``path NUL line\nline\n\n``), the
        cut parts are blanked in one regex pass over the whole output, and each file's block is
        lowercased and searched once per pattern.
        """
        output = self._run(folders, patterns, ["--heading", "--no-line-number"])
        if not output:
            return {}
        lowered = [fold(p) for p in patterns]
        # A NUL, not an empty line: blank lines separate the files' blocks, and no pattern
        # holds a NUL (recall refuses such a query; rg could not take it as an argument).
        text = _blank_lines(skip).sub("\\1\0", output.decode("utf-8", errors="replace"))
        found: Held = {}
        for block in text.split("\n\n"):
            name, nul, lines = block.partition("\0")
            # A file whose patterns were all in cut parts is not there, nor one whose lines match
            # by rg's case folding but not ``fold`` (the pure-Python backend never finds those).
            if nul:
                folded = fold(lines)
                seen = frozenset(i for i, p in enumerate(lowered) if p in folded)
                if seen:
                    found[name] = seen
        return found

    def _run(self, folders: Sequence[Path], patterns: Sequence[str], layout: Sequence[str]) -> bytes:
        """rg's output for ``patterns`` over the existing ``folders`` (empty when nothing to do)."""
        existing = [str(f) for f in folders if f.is_dir()]
        rg = find_ripgrep()
        if not existing or not patterns or rg is None:
            return b""
        fixed, given = rg_patterns(patterns)
        args = [
            rg,
            *(RG_SEARCH_FLAGS if fixed else [f for f in RG_SEARCH_FLAGS if f != "--fixed-strings"]),
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
        for pattern in given:
            args += ["-e", pattern]
        proc = subprocess.run([*args, "--", *existing], capture_output=True, check=False, timeout=60)
        return proc.stdout


@cache
def _blank_lines(skip: re.Pattern[str]) -> re.Pattern[str]:
    """``skip`` (matched at a line's start) as one pass over rg's headed output: after each line
    break or file name's NUL (replace with ``\\1`` and a NUL: no pattern spans the cut).
    Starting with that character lets the regex engine skip ahead to it (``^`` under MULTILINE
    or a lookbehind tried every position: 4x slower). ``skip`` must not match a line break; the
    output never starts with a line, for it starts with a file name."""
    body = skip.pattern.removeprefix("^")
    return re.compile(f"([\\n\\0])(?:{body})", skip.flags)


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
    would look unchanged). At most ``CACHE_CHARS`` characters are kept. ``held`` searches the
    kept texts of a store in one buffer (``Corpus``) and, from the ``arm_after``-th search of
    a store on, skips the ``lstat`` while an inotify feed vouches for the files (``Watched``).
    """

    name = "python"
    priority = 10

    def __init__(self, *, arm_after: int = 2) -> None:
        self._texts: dict[str, tuple[tuple[int, int, int, int], str, str]] = {}
        self._chars = 0
        self._watched = Watched(self._forget, arm_after)
        self._keep = threading.Lock()  # keeping a text against forgetting one
        self._forgotten = 0  # texts forgotten on the feed's word so far
        self._changes = 0  # texts kept, forgotten or dropped so far: a Corpus is of one count
        # Per kept file: the ``skip`` and the folded text its searchable bytes were made of, and
        # those bytes (its lowercased lines less what ``skip`` cuts, UTF-8), or None when the file has
        # more lines than MAX_LINES_PER_FILE (then the first matching ones count).
        self._visible: dict[str, tuple[re.Pattern[str], str, bytes | None]] = {}
        self._corpora: dict[tuple[str, tuple[str, ...], re.Pattern[str]], Corpus] = {}

    def available(self) -> bool:
        """Always true."""
        return True

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """Matching lines of visible ``*.md`` files, symlinks not followed.

        Each file is folded whole (``_grep_fold.fold``) and its patterns found with ``str.find``;
        only the lines holding one are split out (a loop over every line of every file was 4/5 of
        the time).
        """
        lowered = [fold(p) for p in patterns]
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
        """Per file, the patterns its matching lines hold once ``skip``'s match at each line's
        start is cut; a file holding none is left out.

        The same as folding ``search``'s lines, without splitting out lines: a file of at most
        ``MAX_LINES_PER_FILE`` lines holds a pattern when its lowercased text with the cut
        parts left out does. Those texts of a store's kept files are searched in one buffer
        (``Corpus``), so a later search of unchanged files is one ``lstat`` per file (none while
        the feed vouches for them) and a ``find`` per pattern and file holding it.
        """
        lowered = [fold(p) for p in patterns]
        encoded = [p.encode("utf-8", "surrogatepass") for p in lowered]
        found: Held = {}
        sets: dict[int, frozenset[int]] = {}  # one frozenset per combination of patterns
        groups: dict[str, list[str]] = {}
        for folder in folders:
            parent, name = os.path.split(os.path.abspath(folder))
            groups.setdefault(parent, []).append(name)
        for parent, names in groups.items():
            fresh: dict[str, tuple[str, str]] = {}  # texts this search read and did not keep
            listing = self._watched.listing(parent, names)
            if listing is None:
                epoch = self._watched.start(parent, names)
                walked = {name: self._walk(f"{parent}/{name}", fresh) for name in names}
                self._watched.finish(parent, walked, epoch)
                listing = [path for files in walked.values() for path in files]
            corpus = self._corpus((parent, tuple(names), skip), listing, skip)
            members = corpus.members
            for i, mask in corpus.masks(encoded).items():
                seen = sets.get(mask)
                if seen is None:
                    seen = sets[mask] = frozenset(b for b in range(len(encoded)) if mask >> b & 1)
                found[members[i]] = seen
            kept = self._texts
            for path in corpus.odd:
                entry = kept.get(path)
                texts = (entry[1], entry[2]) if entry is not None else fresh.get(path)
                if texts is None:
                    texts = self._text(path, path.rsplit("/", 1)[1])
                if texts is not None and any(p in texts[1] for p in lowered):
                    seen = self._held_in(path, *texts, lowered, encoded, skip)
                    if seen:
                        found[path] = seen
        return found

    def _corpus(
        self, key: tuple[str, tuple[str, ...], re.Pattern[str]], listing: list[str], skip: re.Pattern[str]
    ) -> Corpus:
        """The buffer of ``listing``'s kept texts: the last one while no kept text changed."""
        corpus = self._corpora.get(key)
        if (
            corpus is not None
            and corpus.changes == self._changes
            and (corpus.listing is listing or corpus.listing == listing)
        ):
            return corpus
        changes = self._changes  # before reading the texts: a change meanwhile builds anew
        kept = self._texts
        members: list[str] = []
        blocks: list[bytes] = []
        odd: list[str] = []
        for path in listing:
            entry = kept.get(path)
            block = self._searchable(path, entry, skip) if entry is not None else None
            if block is None:
                odd.append(path)
            else:
                members.append(path)
                blocks.append(block)
        corpus = self._corpora[key] = Corpus(changes, listing, members, blocks, odd)
        return corpus

    def _searchable(
        self, path: str, entry: tuple[tuple[int, int, int, int], str, str], skip: re.Pattern[str]
    ) -> bytes | None:
        """A kept file's lowercased lines less what ``skip`` cuts, UTF-8 (None past
        ``MAX_LINES_PER_FILE`` lines); kept beside its text."""
        made = self._visible.get(path)
        if made is not None and made[0] is skip and made[1] is entry[2]:
            return made[2]
        lines = entry[1].splitlines()
        block = None
        if len(lines) <= MAX_LINES_PER_FILE:
            block = _searched(lines, skip)
        with self._keep:
            if self._texts.get(path) is entry:
                self._visible[path] = (skip, entry[2], block)
        return block

    def _walk(self, folder: str, fresh: dict[str, tuple[str, str]]) -> set[str]:
        """The visible ``*.md`` paths under ``folder``, one ``lstat`` per file: a kept text that
        no longer matches its file is read again; texts read and not kept go into ``fresh``."""
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
                    st: os.stat_result | None = os.stat(path, follow_symlinks=False)
                except OSError:
                    st = None
                if entry is not None:
                    if st is not None and entry[0] == _stat_key(st):
                        continue
                    with self._keep:
                        self._drop(path)  # the buffer must not search it
                if st is None:
                    continue
                texts = self._text(path, name)
                if texts is not None and path not in kept:
                    fresh[path] = texts
        return visible

    def close(self) -> None:
        """Release the inotify fd of the folders it watches."""
        self._watched.close()

    def _forget(self, path: str) -> None:
        """Drop the kept text of a file the feed says changed."""
        with self._keep:
            self._forgotten += 1
            self._changes += 1
            self._drop(path)

    def _drop(self, path: str) -> None:
        """Drop a kept text (the caller holds ``_keep``)."""
        old = self._texts.pop(path, None)
        if old is not None:
            self._chars -= len(old[1])
            self._visible.pop(path, None)
            self._changes += 1

    def _held_in(
        self,
        path: str,
        text: str,
        folded: str,
        lowered: Sequence[str],
        encoded: Sequence[bytes],
        skip: re.Pattern[str],
    ) -> frozenset[int]:
        """The patterns a file outside the buffer holds (not kept, or a long one)."""
        entry = self._texts.get(path)
        if entry is not None and entry[2] is folded:
            block = self._searchable(path, entry, skip)
        else:
            lines = text.splitlines()
            block = None
            if len(lines) <= MAX_LINES_PER_FILE:
                block = _searched(lines, skip)
        if block is not None:
            return frozenset(i for i, p in enumerate(encoded) if p in block)
        held: set[int] = set()
        for _, line, which in _matching_lines(text, folded, lowered):
            rest = fold(skip.sub("", line, count=1))
            held.update(i for i in which if lowered[i] in rest)
        return frozenset(held)

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
        folded = fold(text)
        # A file with another hard link may change through it with no event for this name: kept,
        # a vouched search would trust its text without looking at the file.
        keep = (
            time.time_ns() - st.st_ctime_ns > RACY_NS and len(text) <= CACHE_FILE_CHARS and st.st_nlink == 1
        )
        if keep or kept is not None:
            with self._keep:
                self._drop(path)  # a text not kept anew is stale all the same
                # A text read before the feed said its file changed must not outlive that news: a
                # vouched search trusts kept texts without looking at the file.
                if keep and forgotten == self._forgotten:
                    if self._chars + len(text) > CACHE_CHARS:
                        self._texts.clear()
                        self._visible.clear()
                        self._chars = 0
                    self._chars += len(text)
                    self._texts[path] = (key, text, folded)
                    self._changes += 1
        return text, folded


def _searched(lines: Sequence[str], skip: re.Pattern[str]) -> bytes:
    """The lowercased lines with ``skip``'s match at each one's start cut (UTF-8): what ``held``
    searches of a short file."""
    cut = skip.sub
    return fold("\n".join(rest for line in lines if (rest := cut("", line, count=1)))).encode()


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


class AutoGrepBackend:
    """What ``grep_backend = "auto"`` searches with where ripgrep is the best backend found: rg
    for a process's first grep, the pure-Python backend's kept texts from its second on.

    A one-shot process (the ``coffer`` CLI) reads every file once either way, and rg reads them
    on several threads. A long-lived one (a server, an MCP session) had rg read every file again
    for each recall (120-180 ms of rg's CPU at 10k files); kept texts cost one ``lstat`` per
    file, none while an inotify feed vouches for them, and a ``find`` per pattern in one buffer.
    The answers are rg's (``tests/test_grep_files.py``).
    """

    def __init__(self, first: RipgrepBackend) -> None:
        self.first = first
        self.kept: PythonGrepBackend | None = None
        self._searched = False
        self._guard = threading.Lock()

    @property
    def name(self) -> str:
        """rg's name: what a user chose it for (``coffer doctor`` says so)."""
        return self.first.name

    @property
    def priority(self) -> int:
        """rg's priority."""
        return self.first.priority

    def available(self) -> bool:
        """Whether rg is found."""
        return self.first.available()

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """rg's matching lines."""
        return self.first.search(folders, patterns, max_lines=max_lines)

    def held(self, folders: Sequence[Path], patterns: Sequence[str], *, skip: re.Pattern[str]) -> Held:
        """rg's ``held`` the first time, the kept texts' after (their feed armed at once: this
        process searches again)."""
        with self._guard:
            kept = self.kept
            if kept is None and self._searched:
                kept = self.kept = PythonGrepBackend(arm_after=1)
            self._searched = True
        if kept is None:
            return self.first.held(folders, patterns, skip=skip)
        return kept.held(folders, patterns, skip=skip)

    def close(self) -> None:
        """Release the kept texts' inotify fd."""
        with self._guard:
            if self.kept is not None:
                self.kept.close()


def auto_backend(best: GrepBackend) -> GrepBackend:
    """The backend ``auto`` searches with: ``AutoGrepBackend`` over the built-in rg, else ``best``."""
    return AutoGrepBackend(best) if isinstance(best, RipgrepBackend) else best


@hookimpl
def register_grep_backends(register: Callable[[GrepBackend], None]) -> None:
    """Register the two built-in grep backends."""
    register(RipgrepBackend())
    register(PythonGrepBackend())

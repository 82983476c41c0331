"""What the pure-Python grep backend keeps between searches: the files an inotify feed vouches
for (``Watched``) and, per store, one buffer of every kept file's searchable lines (``Corpus``).

A search of the buffer is one ``bytes.find`` per pattern and per file that holds it, in C, where
a loop over 10,000 kept texts ran a Python call and a substring test per file and pattern (40 of
a warm 10k grep recall's 60 ms of CPU).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate

from ..._store.watch import FolderFeed, under, walkable

# The feed vouches for kept texts at most this long after the walk that verified it; then a search
# walks (one lstat per file) again. A write through a hard link made after that walk, outside the
# watched folders, raises no event: the reconciler's periodic full scan has the same bound.
REWALK_NS = 60_000_000_000
# The patterns whose members a Corpus keeps (an int32 per member holding one).
KEPT_PATTERNS = 256


class Corpus:
    """Files' searchable bytes (lowercased, key lines left out, UTF-8) in one buffer, each file's
    block ended by a NUL (no pattern holds one), and the files whose answer is worked out alone.

    ``members[i]``'s block is ``data[starts[i]:starts[i + 1] - 1]``. Built for one listing of a
    store's files while the backend's kept texts stood at ``changes``; a search with another
    listing, or after a kept text changed, builds a new one.
    """

    __slots__ = ("_holders", "changes", "data", "listing", "members", "odd", "starts")

    def __init__(
        self, changes: int, listing: list[str], members: list[str], blocks: list[bytes], odd: list[str]
    ) -> None:
        self.changes = changes
        self.listing = listing
        self.members = members
        self.data = b"\0".join(blocks) + b"\0" if blocks else b""
        self.starts = list(accumulate((len(b) + 1 for b in blocks), initial=0))
        self.odd = odd
        self._holders: dict[bytes, array[int]] = {}

    def masks(self, patterns: Sequence[bytes]) -> dict[int, int]:
        """Per member holding any pattern, its index and a bit per pattern it holds."""
        found: dict[int, int] = {}
        get = found.get
        for bit, pattern in enumerate(patterns):
            flag = 1 << bit
            for i in self.holders(pattern):
                found[i] = get(i, 0) | flag
        return found

    def holders(self, pattern: bytes) -> array[int]:
        """The indexes of the members holding ``pattern``, kept for the buffer's life (a
        store's common words come back recall after recall; a scan of the buffer for one costs
        about 1 ms per MB).

        One ``find`` per member holding it: after a hit the search goes on from the next
        member's block, so a common word costs one call per file that has it.
        """
        found = self._holders.get(pattern)
        if found is not None:
            return found
        data, starts = self.data, self.starts
        out: list[int] = []
        if not pattern or b"\0" in pattern:  # every block holds "", none a NUL across blocks
            out = [i for i in range(len(self.members)) if pattern in data[starts[i] : starts[i + 1] - 1]]
        else:
            at = data.find(pattern)
            while at != -1:
                i = bisect_right(starts, at) - 1
                out.append(i)
                at = data.find(pattern, starts[i + 1])
        if len(self._holders) >= KEPT_PATTERNS:
            self._holders.clear()
        found = self._holders[pattern] = array("i", out)
        return found


class Watched:
    """The visible ``*.md`` files of the folders a ``PythonGrepBackend`` searched, kept while an
    inotify feed (``_store/watch.py``) vouches for them, so that a search trusts each kept text
    without its ``lstat`` and re-reads only the files the feed named.

    A folder's parent is armed on its second search (a short-lived process such as the CLI
    searches once and never watches; ``arm_after`` says which) and vouched for from the end of the walk that follows; an
    overflow, a failed watch, the parent moved or a fork make the next search walk again.
    """

    def __init__(self, forget: Callable[[str], None], arm_after: int = 2) -> None:
        self._forget = forget
        self._arm_after = arm_after  # the walk of a parent that arms it
        self._feed: FolderFeed | None = None
        self._guard = threading.Lock()
        self._searches: dict[str, int] = {}  # parent -> walks so far
        self._tops: dict[str, frozenset[str]] = {}  # parent -> the folder names armed under it
        self._files: dict[str, set[str]] = {}  # folder -> its visible *.md paths
        self._built: dict[str, int] = {}  # folder -> the epoch its files were walked at
        self._walked: dict[str, int] = {}  # parent -> when (time.monotonic_ns) its last walk started
        # The last listing given per (parent, names), the same list while no file came or went
        # (a search compares it with its buffer's by identity); ``_changes`` counts the news.
        self._listed: dict[tuple[str, tuple[str, ...]], tuple[tuple[int, int], list[str]]] = {}
        self._changes = 0

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
            if files or trees:
                self._changes += 1
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
            if any(self._built.get(f"{parent}/{name}") != epoch for name in names):
                return None
            key = (parent, tuple(names))
            listed = self._listed.get(key)
            if listed is not None and listed[0] == (self._changes, epoch):
                return listed[1]
            out: list[str] = []
            for name in names:
                out.extend(self._files[f"{parent}/{name}"])
            self._listed[key] = ((self._changes, epoch), out)
            return out

    def start(self, parent: str, names: Sequence[str]) -> int | None:
        """Before a walk of ``names`` under ``parent``: arm it from its second walk on; the epoch the
        walk then verifies, or None."""
        with self._guard:
            self._walked[parent] = time.monotonic_ns()
            self._searches[parent] = walks = self._searches.get(parent, 0) + 1
            if walks < self._arm_after:
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
            if self._feed is None:  # closed while the walk ran: nothing vouches for what it found
                return
            self._changes += 1
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
            self._listed.clear()

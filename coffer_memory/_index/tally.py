"""What one reconcile of a store found: the tally behind its report, and odd files warned of once."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable

import attrs

from .._models import ReindexReport
from .._store.scan import OddFiles, printable

log = logging.getLogger("coffer_memory.reconcile")
Progress = Callable[[int, int], None]  # (files done, files in all) of a long scan
Stat = tuple[int, ...]  # a row's (size, mtime_ns, ctime_ns, ino), compared with a scan's FileStat
# Odd entries already warned about by this process: a warning once, not on every read.
_warned: set[tuple[str, str, str]] = set()
_warned_guard = threading.Lock()


def warn_odd(store: str, odd: OddFiles) -> None:
    """Log each odd entry of ``store`` once per process (it is skipped on every read)."""
    for rel, reason in odd.items():
        key = (store, rel, reason)
        with _warned_guard:
            if key in _warned:
                continue
            _warned.add(key)
        log.warning("skipping %s in store %s: %s", printable(rel), store, reason)


@attrs.define
class Tally:
    """Counts (and changes made outside coffer) of one reconcile, turned into its report."""

    scanned: int = 0
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[str] = attrs.Factory(list)
    # Changes made outside coffer: (event, document id, store-relative path, details).
    external: list[tuple[str, str | None, str, dict[str, str]]] | None = None
    seen: bool = True  # the index knew the store: a file it has no row for is new

    def report(self, store: str) -> ReindexReport:
        """The report of this reconcile of ``store``."""
        return ReindexReport(
            store=store,
            scanned=self.scanned,
            added=self.added,
            updated=self.updated,
            removed=self.removed,
            unchanged=self.unchanged,
            skipped=tuple(self.skipped),
        )


@functools.lru_cache(maxsize=1024)
def unchanged(store: str, count: int) -> ReindexReport:
    """The report of a read's check that found nothing to do (every read makes one: one object
    per store and count, frozen)."""
    return ReindexReport(store=store, scanned=0, added=0, updated=0, removed=0, unchanged=count)

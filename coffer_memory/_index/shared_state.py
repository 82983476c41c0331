"""What every connection of this process to one index file must see, kept per file path.

``IndexDB`` holds one connection per service, and a process may run several services on one home
(a REST server's readers, a notebook's second service): a repair by one of them must make the
others reopen, and damage one of them met must reach the next reconcile, whichever runs it.
"""

from __future__ import annotations

import threading
from pathlib import Path

import attrs


@attrs.define
class Shared:
    """What every connection of this process to one index file must see: a repair by one of
    them (the others reopen), or damage one of them met (the next reconcile repairs it)."""

    generation: int = 0
    damaged: str | None = None
    seen: tuple[int, int] = (0, 0)  # (inode, largest size) of the file seen (``IndexDB._cut_short``)
    holders: int = 0  # this process's open connections to the file (``IndexDB._hold``)


_by_path: dict[str, Shared] = {}
# Held while a connection reads or changes its file's ``Shared`` (``IndexDB._hold``, ``_let_go``,
# ``_replaced``), so two services' connections never interleave their updates.
guard = threading.Lock()


def shared_state(path: Path) -> Shared:
    """The one ``Shared`` of the index file at ``path`` in this process."""
    with guard:
        return _by_path.setdefault(str(path), Shared())

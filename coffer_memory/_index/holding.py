"""``Reindexer.holding``'s context: while it is entered, this thread's indexing embeds nothing."""

from __future__ import annotations

import threading
from typing import Any


class Holding:
    """Sets the thread-local ``held.on`` for the block and puts back what it was (nested blocks
    keep it on). A class rather than a ``contextmanager`` generator: every store's reconcile in
    every recall enters one, and the generator's frame, wrapper and ``StopIteration`` were most of
    its cost."""

    __slots__ = ("_before", "_held")

    def __init__(self, held: threading.local) -> None:
        self._held = held
        self._before = False

    def __enter__(self) -> None:
        self._before = getattr(self._held, "on", False)
        self._held.on = True

    def __exit__(self, *exc: Any) -> None:
        self._held.on = self._before

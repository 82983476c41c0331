"""Auto-organize: after a store has been quiet for a while, organize it in the background.

Opt-in (``[organize] auto = true``). Each write re-arms one timer per store; when it fires,
organize runs on a worker thread. Failures are logged, never raised; ``close`` cancels the
timers (an un-run pass simply leaves the inbox for the next one) and waits for a running
pass to finish, so nothing is lost.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("coffer_memory.auto_organize")


class Debouncer:
    """One re-armable timer per key; ``run(key)`` fires after ``delay`` seconds of quiet."""

    def __init__(self, delay: float, run: Callable[[str], object]) -> None:
        self.delay = delay
        self._run = run
        self._timers: dict[str, threading.Timer] = {}
        self._lock = threading.Lock()
        self._busy = threading.Lock()  # one pass at a time per service
        self._closed = False

    def notify(self, key: str) -> None:
        """A write happened in ``key``: (re)start its quiet period."""
        with self._lock:
            if self._closed:
                return
            old = self._timers.pop(key, None)
            if old is not None:
                old.cancel()
            timer = threading.Timer(self.delay, self._fire, args=(key,))
            timer.daemon = True
            self._timers[key] = timer
            timer.start()

    def _fire(self, key: str) -> None:
        with self._lock:
            self._timers.pop(key, None)
            if self._closed:
                return
        with self._busy:
            try:
                self._run(key)
            except Exception:
                log.exception("auto-organize of %s failed", key)

    def pending(self) -> list[str]:
        """Keys whose timer is armed."""
        with self._lock:
            return sorted(self._timers)

    def close(self, timeout: float = 30.0) -> None:
        """Cancel armed timers and wait (up to ``timeout``) for a running pass."""
        with self._lock:
            self._closed = True
            timers = list(self._timers.values())
            self._timers.clear()
        for timer in timers:
            timer.cancel()
        if self._busy.acquire(timeout=timeout):
            self._busy.release()

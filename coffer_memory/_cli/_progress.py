"""A one-line progress count on standard error for the long CLI commands (``import``, ``distill``).

Drawn only when standard error is a terminal: a pipe, a file or ``--json`` gets nothing. It stands
in for tqdm, which was a core dependency for these two counters alone (0.68 MB installed with its
dist-info and script: issue #15 item 8's core budget, docs/benchmarks.md "size30").
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

# At most this many redraws a second: a 10k-file import steps 20,000 times.
REDRAW_SECONDS = 0.1


class Progress:
    """``name: done/total unit (percent)`` (or ``name: done unit`` without a total) on one line,
    redrawn in place, at most every ``REDRAW_SECONDS`` and at each new name."""

    def __init__(
        self,
        unit: str,
        *,
        desc: str = "",
        enabled: bool = True,
        leave: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.on = enabled and self.stream.isatty()
        self.unit, self.desc, self.leave = unit, desc, leave
        self.n = 0
        self.total: int | None = None
        self._drawn = 0.0
        self._shown = False

    def reset(self, desc: str, total: int | None) -> None:
        """A new phase: its name and total, the count back at 0, drawn at once."""
        self.desc, self.total, self.n = desc, total, 0
        self._draw(force=True)

    def update(self, done: int = 1) -> None:
        """``done`` more steps."""
        self.n += done
        self._draw(force=False)

    def close(self) -> None:
        """The last count drawn and the line ended (kept with ``leave``, else erased)."""
        if not (self.on and self._shown):
            return
        self._draw(force=True)
        self.stream.write("\n" if self.leave else "\r\x1b[K")
        self.stream.flush()

    def _draw(self, *, force: bool) -> None:
        if not self.on:
            return
        now = time.monotonic()
        if not force and now - self._drawn < REDRAW_SECONDS:
            return
        self._drawn, self._shown = now, True
        count = f"{self.n}/{self.total}" if self.total else str(self.n)
        share = f" ({100 * self.n // self.total}%)" if self.total else ""
        name = f"{self.desc}: " if self.desc else ""
        self.stream.write(f"\r{name}{count} {self.unit}{share}\x1b[K")
        self.stream.flush()

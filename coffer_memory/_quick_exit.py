"""Ending a short-lived command's process without tearing the interpreter down.

A ``coffer recall`` lives ~0.25 s, and Python's own finalization (every module cleared and every
object freed one by one, then a last garbage collection) took ~40 ms of it on the 2-core VM: work
whose only result is memory that the system takes back at exit anyway. The ``coffer`` console
script ends through ``leave`` once ``main`` has returned; ``main`` itself returns as before, so code
that calls it (tests, other programs) keeps its process. (``coffer-hook`` imports a third as much
and measured no gain: it exits as usual.)
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def leave(status: int) -> NoReturn:
    """End the process with ``status`` as a normal exit would, minus the interpreter's teardown.

    The exit handlers run (``atexit``: logging's flush among them) and stdout and stderr are
    flushed. Everything coffer writes is durable before its command returns (atomic renames with
    fsync, the index connections closed), so nothing is left for the teardown to do. While a
    thread that is not a daemon still runs, the normal exit is taken instead: the interpreter
    waits for that thread, and ``os._exit`` would cut it short.
    """
    main = threading.main_thread()
    if any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        sys.exit(status)
    # atexit's own runner, as Python's finalization calls it (private, but present since 3.0 and
    # the only way to run the registered handlers before os._exit).
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that left (``| head``), a closed stream
            pass
    os._exit(status)

"""Python's own Ctrl-C handling back once a command's ``try`` can catch it.

The console scripts (``_coffer_scripts``) put a handler on SIGINT before they import anything that
ends the process quietly; the command's ``try`` calls ``ready`` first thing, so that from there a
Ctrl-C raises ``KeyboardInterrupt`` where the command handles it (``coffer``: ``interrupted``,
status 130). ``done`` puts the quiet handler back for the last milliseconds (the exit handlers),
where a ``KeyboardInterrupt`` would print "Exception ignored in atexit callback" and a traceback.
A command run any other way (``main(argv)`` in a test or a program) finds no such handler and
changes nothing.
"""

from __future__ import annotations

# ``signal`` builds three IntEnums when imported (~3M instructions, 0.5% of a keyword recall, which
# does not import it otherwise); its built-in core has what is needed here (and no stubs).
import _signal  # type: ignore[import-not-found]
from typing import Any

_set_aside: list[Any] = []


def ready() -> None:
    """``KeyboardInterrupt`` on Ctrl-C from here on, when a console script's quiet handler is set."""
    handler = _signal.getsignal(_signal.SIGINT)
    if getattr(handler, "coffer_early", False):
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        _set_aside.append(handler)


def done() -> None:
    """The quiet handler again, for what is left after the command's ``try`` (the process's end)."""
    if _set_aside and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _set_aside.pop())

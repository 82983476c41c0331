"""The console scripts' entry points (``[project.scripts]``): quiet on Ctrl-C from their first line.

A console script imports its command before the command's own ``try`` can catch
``KeyboardInterrupt``: ``coffer recall`` loads about 60 ms of modules, ``coffer-mcp`` more. A
Ctrl-C in those milliseconds printed a ``KeyboardInterrupt`` traceback (into an agent's MCP log,
or as a hook's output). So each entry point first puts a handler of its own on SIGINT that ends
the process at once as its command ends on Ctrl-C (``coffer``: ``interrupted`` on stderr, status
130; ``coffer-hook`` and ``coffer-api``: nothing, status 0; ``coffer-mcp``: nothing, status 130),
and only then imports the command. Nothing is written before the command runs, so ending there
loses nothing. The command's ``try`` puts Python's own handler back
(``coffer_memory._interrupt.ready``): from there a Ctrl-C is the command's ``KeyboardInterrupt``.

This module is top-level, outside the packages, so that no package's ``__init__`` runs before the
handler is in place; it imports nothing new (``os`` and ``_signal`` are loaded with the
interpreter). What is left is Python's own start-up and the import statement of the file pip
writes. A process started with SIGINT ignored (a background job of a script) keeps it ignored.
"""

# No ``from __future__ import annotations``, ``typing`` or ``signal`` (it imports enum): each is an
# import before the handler. ``_signal`` is the built-in module under ``signal`` (no stubs).
import _signal  # type: ignore[import-not-found]
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType

__all__ = ["coffer", "coffer_api", "coffer_hook", "coffer_mcp"]


class Early:
    """SIGINT's handler until the command's ``try``: ends the process with ``status``, ``said``
    written to stderr first. ``coffer_early`` marks it for ``coffer_memory._interrupt``."""

    coffer_early = True

    def __init__(self, status: int, said: bytes = b"") -> None:
        self.status = status
        self.said = said

    def __call__(self, signum: int, frame: "FrameType | None") -> None:
        if self.said:
            try:  # noqa: SIM105 (contextlib would be one more import before the handler)
                os.write(2, self.said)
            except OSError:  # no stderr to say it on: the status says it
                pass
        os._exit(self.status)


def _arm(status: int, said: bytes = b"") -> None:
    # Only over Python's own handler: an ignored SIGINT (``nohup``, a script's background job) stays.
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, Early(status, said))


def coffer() -> None:
    """``coffer``: Ctrl-C before the command runs says ``interrupted`` and ends with 130, as after."""
    _arm(130, b"\ninterrupted\n")
    from coffer_memory._cli import console

    console()


def coffer_hook() -> int:
    """``coffer-hook``: the agent sees status 0 and no output, whenever the Ctrl-C comes."""
    _arm(0)
    from coffer_memory._agents.hook import main

    return _ended(main())


def coffer_mcp() -> int:
    """``coffer-mcp``: status 130 and nothing on stderr (the agent's MCP log), as while the SDK loads."""
    _arm(130)
    from coffer_memory_mcp._stdio import main

    return _ended(main())


def coffer_api() -> int:
    """``coffer-api``: quietly, status 0, as Ctrl-C while it starts is documented."""
    _arm(0)
    from coffer_memory_fastapi.cli import main

    return _ended(main())


def _ended(status: int) -> int:
    """``status``, with the quiet handler back for the interpreter's exit (flushes, exit handlers,
    teardown), where a ``KeyboardInterrupt`` prints "Exception ignored" and a traceback.
    (``coffer`` does this in ``console``, which never returns.)"""
    from coffer_memory._interrupt import done

    done()
    return status

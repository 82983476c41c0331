"""``CallGate``: which calls run on a ``MemoryService``, so that ``close()`` can wait for them.

``close()`` used to close the index connections under calls other threads were making: those
calls failed with a raw ``apsw.ConnectionClosedError`` (and a later call silently opened the index
again). Now each public call of the facade passes the gate: ``close()`` shuts it (calls started
after it get ``ServiceClosed``), waits a bounded time for the calls already running to finish,
then closes the parts. A call still running after that wait, which meets a closed connection,
fails with ``ServiceClosed`` too. Calls a running call makes on the same thread (the facade
calling itself) always pass: they belong to a call already admitted.
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from ._errors import ServiceClosed

__all__ = ["CallGate", "gate_public_calls"]

F = TypeVar("F", bound=Callable[..., Any])

# What a call meets when the connection it used was closed under it (the index and the vector
# tables are apsw; the ledger and a few side files are sqlite3).
_CLOSED_UNDER: tuple[type[BaseException], ...] = (
    apsw.ConnectionClosedError,
    apsw.CursorClosedError,
    sqlite3.ProgrammingError,
)


class CallGate:
    """Counts the threads inside a call; ``shut`` refuses new ones and waits for those inside."""

    def __init__(self) -> None:
        # enter and leave take the lock itself: the Condition's ``with`` is a Python-level call.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._running = 0  # threads inside a call (a nested call on the same thread counts once)
        self._depth = threading.local()
        self.shut_down = False

    def inside(self) -> bool:
        """True when the calling thread is inside a call admitted by this gate."""
        return bool(getattr(self._depth, "n", 0))

    def enter(self) -> None:
        """Admit the calling thread (``ServiceClosed`` once shut, unless it is inside a call)."""
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            with self._lock:
                if self.shut_down:
                    raise ServiceClosed()
                self._running += 1
        self._depth.n = depth + 1

    def leave(self) -> None:
        """The calling thread's call returned (or raised)."""
        depth = self._depth.n - 1
        self._depth.n = depth
        if depth == 0:
            with self._lock:
                self._running -= 1
                # Only ``shut`` waits, and it sets ``shut_down`` under this lock before it does:
                # no call needs waking before then (``notify_all`` was most of a leave's cost).
                if self.shut_down:
                    self._cond.notify_all()

    def shut(self, timeout: float | None) -> int | None:
        """Refuse new calls and wait up to ``timeout`` seconds (None: for good) for the running
        ones; how many still run (None when it was shut already: a second close does nothing)."""
        own = 1 if self.inside() else 0  # close() from inside a call does not wait for itself
        with self._cond:
            if self.shut_down:
                return None
            self.shut_down = True
            self._cond.wait_for(lambda: self._running <= own, timeout)
            return self._running - own


def _gated(fn: F) -> F:
    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        gate: CallGate = self._gate
        gate.enter()
        try:
            return fn(self, *args, **kwargs)
        except _CLOSED_UNDER as exc:
            if gate.shut_down:  # closed under this call by close(): say so, typed
                raise ServiceClosed() from exc
            raise
        finally:
            gate.leave()

    return call  # type: ignore[return-value]


def gate_public_calls(cls: type[Any], *, skip: frozenset[str] = frozenset()) -> None:
    """Route each public method and property defined on ``cls`` itself through its owner's
    ``_gate`` (``skip`` names those that must not be, such as ``close``)."""
    for name, value in list(vars(cls).items()):
        if name.startswith("_") or name in skip:
            continue
        if isinstance(value, property) and value.fget is not None:
            setattr(cls, name, property(_gated(value.fget), value.fset, value.fdel, value.__doc__))
        elif callable(value) and not isinstance(value, (type, staticmethod, classmethod)):
            setattr(cls, name, _gated(value))

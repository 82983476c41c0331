"""``component``: a facade attribute built on first access, so start-up pays only for what it uses.

``MemoryService`` holds a dozen components; a keyword recall from the CLI needs three of them.
Each other component is a ``@component`` method: its body imports the component's module and
builds it, once per service. Unlike ``functools.cached_property`` (whose lock, on Python 3.11,
is shared by every instance of the class), the build runs under the owner's own ``_build_lock``
(an ``RLock``: building the organizer builds the lanes it needs).

    class MemoryService:
        def __init__(self) -> None:
            self._build_lock = threading.RLock()

        @component
        def lanes(self) -> Lanes:
            \"\"\"Journal, handoff, rules and consolidation log (``svc.lanes``).\"\"\"
            from ._lanes import Lanes

            return Lanes(...)

``MemoryService.lanes.built(svc)`` is the component if it was built, else None (``close()``
closes only what was opened).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, Self, TypeVar, overload

T = TypeVar("T")


class Owner(Protocol):
    """What a class holding components provides: its own build lock."""

    _build_lock: threading.RLock


OwnerT = TypeVar("OwnerT", bound=Owner)


class component(Generic[OwnerT, T]):
    """A read-only attribute whose value ``build(owner)`` makes on first access."""

    def __init__(self, build: Callable[[OwnerT], T]) -> None:
        self.build = build
        self.__doc__ = build.__doc__
        self.slot = f"_{build.__name__}_built"

    @overload
    def __get__(self, owner: None, cls: type[Any]) -> Self: ...

    @overload
    def __get__(self, owner: OwnerT, cls: type[Any]) -> T: ...

    def __get__(self, owner: OwnerT | None, cls: type[Any]) -> T | Self:
        if owner is None:
            return self
        value: T | None = getattr(owner, self.slot, None)
        if value is None:
            with owner._build_lock:
                value = getattr(owner, self.slot, None)
                if value is None:
                    value = self.build(owner)
                    setattr(owner, self.slot, value)
        return value

    def built(self, owner: OwnerT) -> T | None:
        """The component if it was built for ``owner``, else None (nothing is built)."""
        value: T | None = getattr(owner, self.slot, None)
        return value

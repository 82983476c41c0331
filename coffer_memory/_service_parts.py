"""``ServiceParts``: what composes a ``MemoryService`` and owns the lifecycle of its parts.

Each part is built with explicit collaborators: the settings, the index handle, the Writer (the one
write transaction), the target resolver and ``Facts`` at once; every other component on first use
(``component`` below), so a keyword recall builds none of them. ``close()`` closes what was built.
The facade's calls build on this class: those on the facts and the other lanes in ``_service_lanes``,
the rest in ``_service``.

``component``: a facade attribute built on first access, so start-up pays only for what it uses.

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

import logging
import os
import tempfile
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar, overload

from ._checks import content_checks
from ._config import Settings
from ._core import Facts, WriteEvents
from ._errors import ServiceClosed
from ._gate import CallGate, gate_public_calls
from ._home import INDEX_DB, HomeLayout, check_home
from ._indexing import IndexHandle, Models
from ._models import ResolvedScope, Target
from ._store.lock import read_only_locks
from ._store.writer import Writer
from ._targets import PathLike, Targets, resolved_scope
from .vocabulary import Scope

if TYPE_CHECKING:  # the components below are imported when first used (``component``)
    from ._agents.homes import AgentHomes
    from ._agents.service import Agents
    from ._index.db import IndexDB
    from ._index.reconcile import Reconciler
    from ._index.reindex import Reindexer
    from ._lanes import Lanes
    from ._organize.service import Organizer
    from ._porting import Porting
    from ._retrieval import KnowledgeRetrieval
    from ._store.paths import StorePaths
    from ._stores import Stores
    from ._transcripts.ledger import Ledger
    from ._transcripts.service import Transcripts
    from .plugins.hookspecs import LLM

__all__ = ["ServiceParts", "component"]

log = logging.getLogger("coffer_memory")

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
        gate: CallGate | None = getattr(owner, "_gate", None)
        if gate is not None and gate.shut_down and not gate.inside():
            raise ServiceClosed()  # closed: its components are not handed out (nor built again)
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


# How long ``close()`` waits, by default, for the calls other threads are making.
CLOSE_WAIT_SECONDS = 30.0


class ServiceParts:
    """The parts of a ``MemoryService``: its components, their plumbing and their lifecycle."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        gate_public_calls(cls, skip=_UNGATED)

    def __init__(
        self, home: str | os.PathLike[str] | None = None, *, settings: Settings | None = None
    ) -> None:
        self._gate = CallGate()
        self.settings = settings if settings is not None else Settings.load(home)
        self.home = self.settings.home
        self._private: tempfile.TemporaryDirectory[str] | None = None
        writable = check_home(self.home)
        read_only_locks(HomeLayout(self.home).locks, not writable)
        if not writable:
            # A home this process may read, not write: its index goes to a private folder, built
            # from the files by the first read; writes fail with STORAGE_NOT_WRITABLE.
            self._private = tempfile.TemporaryDirectory(prefix="coffer-index-")
            log.warning(
                "coffer home %s is not writable by this process: reading it with a private index in %s",
                self.home,
                self._private.name,
            )
        self._build_lock = threading.RLock()
        self.index = IndexHandle(
            self.settings, index_path=Path(self._private.name) / INDEX_DB if self._private else None
        )
        self.models = Models(self.settings)
        self.writer = Writer(
            self.home,
            self.settings.memory_dir,
            self.index.lock,
            self.index,
            content_checks(self.settings.security),
            read_only=self._private is not None,
        )
        self.targets = Targets(self.settings.memory_dir, self.writer)
        self._events = WriteEvents()
        self.facts = Facts(self.settings, self.index, self.writer, self.targets, self._events)
        if self.settings.organize.auto:  # it listens for new facts from the start
            self.organizer  # noqa: B018

    # -- components built on first use (a keyword recall needs none of them) --------------------
    @component
    def lanes(self) -> Lanes:
        """Journal, handoff, rules, consolidation log and the session-start bundle."""
        from ._lanes import Lanes

        return Lanes(self.settings, self.index, self.writer, self.targets, self.facts)

    @component
    def store_admin(self) -> Stores:
        """Stores: listing, labels, deletion, re-index and doctor."""
        from ._stores import Stores

        return Stores(self.settings, self.index, self.writer, self.targets)

    @component
    def organizer(self) -> Organizer:
        """The LLM organizer: organize, reorganize, auto-organize."""
        from ._organize.service import Organizer
        from ._organize.tools import OrganizeTools

        tools = OrganizeTools(self.settings, self.index, self.writer, self.facts, self.lanes)
        return Organizer(tools, self.models, self._events)

    @component
    def transcripts(self) -> Transcripts:
        """The agents' past sessions: listing, distillation, the ledger."""
        from ._transcripts.service import Transcripts

        return Transcripts(self.settings, self.models, self.writer, self.targets, self.lanes)

    @component
    def integrations(self) -> Agents:
        """Coffer's hooks and MCP entries in each agent's configuration."""
        from ._agents.service import Agents

        return Agents(self.settings, self.index)

    @component
    def porting(self) -> Porting:
        """Export of the truth files and import from coffer exports and other tools' memories."""
        from ._porting import Porting

        return Porting(self.settings, self.writer, self.targets, self.facts, self.store_admin)

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def db(self) -> IndexDB:
        """The index connection, opened (and migrated) on first use."""
        return self.index.db

    @property
    def retrieval(self) -> KnowledgeRetrieval:
        """The recall facade over this home's index."""
        return self.index.retrieval

    @property
    def reindexer(self) -> Reindexer:
        """The single re-index routine of this home."""
        return self.index.reindexer

    @property
    def reconciler(self) -> Reconciler:
        """The reconcile-on-read driver of this home."""
        return self.index.reconciler

    @property
    def llm(self) -> LLM | None:
        """The configured internal model, or None (``[llm] provider = "none"``, the default)."""
        return self.models.llm()

    @property
    def ledger(self) -> Ledger:
        """The ``distilled_sessions`` ledger of this home (``<home>/ledger.db``)."""
        return self.transcripts.ledger

    @property
    def agent_homes(self) -> AgentHomes | None:
        """The agents' directories, when pinned (else they come from the environment at each call)."""
        return self.integrations.agent_homes

    @agent_homes.setter
    def agent_homes(self, homes: AgentHomes | None) -> None:
        self.integrations.agent_homes = homes

    def paths(self, store: str) -> StorePaths:
        """The on-disk paths of a store (validates the name)."""
        return self.targets.paths(store)

    def target(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> Target:
        """Where a call lands: ``store``, else the store ``scope`` maps to from ``cwd`` (resolved once)."""
        return self.targets.resolve(store=store, cwd=cwd, scope=scope)

    def resolve_store(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> str:
        """A store name from an explicit ``store``, or from ``scope`` and ``cwd``."""
        return self.targets.resolve(store=store, cwd=cwd, scope=scope).store

    def resolve_scope(self, cwd: PathLike | None = None, scope: Scope = "project") -> ResolvedScope:
        """The store a scope maps to from ``cwd``, with the project root and this worktree's branch."""
        return resolved_scope(self.targets.resolve(cwd=cwd, scope=scope))

    def recall_stores(self, cwd: PathLike | None = None) -> list[str]:
        """The stores recall searches from ``cwd``: the project's (inside a git repo), then global."""
        return [t.store for t in self.targets.recall(cwd)]

    def writing(self, store: str) -> AbstractContextManager[None]:
        """Hold this service's index lock and the store's inter-process write lock."""
        return self.writer.locked(store)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self, timeout: float | None = CLOSE_WAIT_SECONDS) -> None:
        """Close the service: calls started from now on fail with ``ServiceClosed``; the calls other
        threads are making are given up to ``timeout`` seconds (None: as long as they take) to
        finish; then pending auto-organize passes are cancelled, the ledger and the index closed.
        A call still running then fails with ``ServiceClosed`` if it needs the index again.
        Closing again is harmless: it closes what such a call kept open meanwhile."""
        running = self._gate.shut(timeout)
        if running is None:  # closed before: close what a call that outlived that close left open
            self.index.close(final=True, timeout=timeout)
            return
        if running:
            log.warning("close: %d call(s) still running after %ss; closing under them", running, timeout)
        organizer = ServiceParts.organizer.built(self)
        if organizer is not None:
            organizer.close()
        transcripts = ServiceParts.transcripts.built(self)
        if transcripts is not None:
            transcripts.close()
        self.index.close(final=True, timeout=timeout)
        if self._private is not None:
            self._private.cleanup()

    def __repr__(self) -> str:  # a notebook shows it for ``svc``: the home it works on, not an address
        return f"{type(self).__name__}(home={str(self.home)!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        self.close()


_UNGATED = frozenset({"close"})
gate_public_calls(ServiceParts, skip=_UNGATED)

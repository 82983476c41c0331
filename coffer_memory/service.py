"""MemoryService: the facade every face (Python, CLI, REST, MCP) uses.

The methods live in focused modules and are combined here: ``core`` (plumbing, facts,
recall), ``stores`` (listing, labels, reindex, doctor) and ``lanes`` (journal, handoff,
rules, consolidation log, INDEX.md) and ``organize`` (the LLM organizer).
"""

from __future__ import annotations

from .core import Scope, ServiceCore
from .lanes import LanesMixin
from .organize.mixin import OrganizeMixin
from .stores import StoresMixin

__all__ = ["MemoryService", "Scope"]


class MemoryService(OrganizeMixin, LanesMixin, StoresMixin, ServiceCore):
    """Remember, recall, list, edit and delete facts, and keep the lanes beside them.

    ``MemoryService(home=None)`` uses ``$COFFER_HOME``, else ``~/.coffer``; pass
    ``settings=Settings.load(...)`` for more control. Thread-safe; also a context manager.
    """

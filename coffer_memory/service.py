"""MemoryService: the facade every face (Python, CLI, REST, MCP) uses.

The methods live in focused modules and are combined here: ``core`` (plumbing, facts,
recall), ``stores`` (listing, labels, reindex, doctor) and ``lanes`` (journal, handoff,
rules, consolidation log, INDEX.md), ``organize`` (the LLM organizer),
``transcripts`` (past agent sessions: list, scrub, distill into the journal) and
``agents.mixin`` (agent hook / MCP install and native-memory toggles).
"""

from __future__ import annotations

from .agents.mixin import AgentsMixin
from .core import Scope, ServiceCore
from .lanes import LanesMixin
from .organize.mixin import OrganizeMixin
from .stores import StoresMixin
from .transcripts.mixin import TranscriptsMixin

__all__ = ["MemoryService", "Scope"]


class MemoryService(AgentsMixin, TranscriptsMixin, OrganizeMixin, LanesMixin, StoresMixin, ServiceCore):
    """Remember, recall, list, edit and delete facts, and keep the lanes beside them.

    ``MemoryService(home=None)`` uses ``$COFFER_HOME``, else ``~/.coffer``; pass
    ``settings=Settings.load(...)`` for more control. Thread-safe; also a context manager.
    """

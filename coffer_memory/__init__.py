"""coffer-memory: one shared, local-first long-term memory for coding agents.

Facts are Markdown files with YAML frontmatter; an SQLite index makes recall fast and is
always rebuildable from the files. Start with ``MemoryService``.
"""

# Public names are imported on first use (PEP 562): ``coffer-hook`` imports a few light submodules
# and must not pay for pydantic, the index and the retrieval stack on every agent session start.
import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .agents.codex_trust import HookTrust
    from .agents.homes import AgentHomes
    from .agents.install import AgentChange, AgentStatus
    from .agents.probe import McpCheck
    from .aio import AsyncMemoryService
    from .config import MemoryStoreConfig, Settings
    from .errors import (
        AgentConfigInvalid,
        CofferError,
        EmbeddingUnavailable,
        InvalidCursor,
        InvalidInput,
        MemoryConflict,
        MemoryNotFound,
        MemoryRejected,
        MemoryStoreNotFound,
        ScopeUnresolved,
        SessionNotFound,
        StorageFull,
        StoreNotDeletable,
    )
    from .index.chunking import chunk_markdown
    from .models import (
        BrokenFile,
        ClearResult,
        ConsolidationLog,
        DoctorReport,
        FactRecord,
        HandoffScene,
        JournalFile,
        LaneWrite,
        MemoryFact,
        MemoryHit,
        MemoryScope,
        MutationResult,
        Page,
        RecallResult,
        ReindexReport,
        ResolvedScope,
        ResumeResult,
        RulesView,
        StoreInfo,
        Target,
        WriteReceipt,
    )
    from .organize.models import OrganizeReport, PlannedChange, ReorgReport
    from .retrieval import KnowledgeRetrieval
    from .service import MemoryService
    from .transcripts.ledger import LedgerEntry
    from .transcripts.listing import SessionPage
    from .transcripts.models import DistillResult, SessionSummary, SweepResult
    from .transcripts.scrub import ScrubbedTranscript, ScrubReport
    from .wire import JsonExtra, JsonShape, json_field, json_items

_EXPORTS: dict[str, str] = {
    "AgentHomes": ".agents.homes",
    "AsyncMemoryService": ".aio",
    "AgentChange": ".agents.install",
    "AgentStatus": ".agents.install",
    "HookTrust": ".agents.codex_trust",
    "McpCheck": ".agents.probe",
    "MemoryStoreConfig": ".config",
    "Settings": ".config",
    "AgentConfigInvalid": ".errors",
    "CofferError": ".errors",
    "EmbeddingUnavailable": ".errors",
    "InvalidCursor": ".errors",
    "InvalidInput": ".errors",
    "MemoryConflict": ".errors",
    "MemoryNotFound": ".errors",
    "MemoryRejected": ".errors",
    "MemoryStoreNotFound": ".errors",
    "ScopeUnresolved": ".errors",
    "SessionNotFound": ".errors",
    "StorageFull": ".errors",
    "StoreNotDeletable": ".errors",
    "chunk_markdown": ".index.chunking",
    "BrokenFile": ".models",
    "ClearResult": ".models",
    "ConsolidationLog": ".models",
    "DoctorReport": ".models",
    "FactRecord": ".models",
    "HandoffScene": ".models",
    "JournalFile": ".models",
    "LaneWrite": ".models",
    "MemoryFact": ".models",
    "MemoryHit": ".models",
    "MemoryScope": ".models",
    "MutationResult": ".models",
    "Page": ".models",
    "RecallResult": ".models",
    "ReindexReport": ".models",
    "ResolvedScope": ".models",
    "ResumeResult": ".models",
    "RulesView": ".models",
    "StoreInfo": ".models",
    "Target": ".models",
    "WriteReceipt": ".models",
    "OrganizeReport": ".organize.models",
    "PlannedChange": ".organize.models",
    "ReorgReport": ".organize.models",
    "KnowledgeRetrieval": ".retrieval",
    "MemoryService": ".service",
    "LedgerEntry": ".transcripts.ledger",
    "SessionPage": ".transcripts.listing",
    "DistillResult": ".transcripts.models",
    "SessionSummary": ".transcripts.models",
    "SweepResult": ".transcripts.models",
    "ScrubReport": ".transcripts.scrub",
    "ScrubbedTranscript": ".transcripts.scrub",
    "JsonExtra": ".wire",
    "JsonShape": ".wire",
    "json_field": ".wire",
    "json_items": ".wire",
}

__all__ = [
    "AgentChange",
    "AgentConfigInvalid",
    "AgentHomes",
    "AgentStatus",
    "AsyncMemoryService",
    "BrokenFile",
    "ClearResult",
    "CofferError",
    "ConsolidationLog",
    "DistillResult",
    "DoctorReport",
    "EmbeddingUnavailable",
    "FactRecord",
    "HandoffScene",
    "HookTrust",
    "InvalidCursor",
    "InvalidInput",
    "JournalFile",
    "JsonExtra",
    "JsonShape",
    "KnowledgeRetrieval",
    "LaneWrite",
    "LedgerEntry",
    "McpCheck",
    "MemoryConflict",
    "MemoryFact",
    "MemoryHit",
    "MemoryNotFound",
    "MemoryRejected",
    "MemoryScope",
    "MemoryService",
    "MemoryStoreConfig",
    "MemoryStoreNotFound",
    "MutationResult",
    "OrganizeReport",
    "Page",
    "PlannedChange",
    "RecallResult",
    "ReindexReport",
    "ReorgReport",
    "ResolvedScope",
    "ResumeResult",
    "RulesView",
    "ScopeUnresolved",
    "ScrubReport",
    "ScrubbedTranscript",
    "SessionNotFound",
    "SessionPage",
    "SessionSummary",
    "Settings",
    "StorageFull",
    "StoreInfo",
    "StoreNotDeletable",
    "SweepResult",
    "Target",
    "WriteReceipt",
    "__version__",
    "chunk_markdown",
    "json_field",
    "json_items",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

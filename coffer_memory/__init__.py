"""coffer-memory: one shared, local-first long-term memory for coding agents.

Facts are Markdown files with YAML frontmatter; an SQLite index makes recall fast and is
always rebuildable from the files. Start with ``MemoryService``.
"""

# Public names are imported on first use (PEP 562): ``coffer-hook`` imports a few light submodules
# and must not pay for pydantic, the index and the retrieval stack on every agent session start.
from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__

if TYPE_CHECKING:
    from ._agents.codex_trust import HookTrust
    from ._agents.context import build_session_context
    from ._agents.homes import AgentHomes
    from ._agents.install import AgentChange, AgentStatus
    from ._agents.probe import McpCheck
    from ._aio import AsyncMemoryService
    from ._config import EmbeddingSettings, LLMSettings, MemoryStoreConfig, Settings
    from ._errors import (
        AgentConfigInvalid,
        CofferError,
        EmbeddingUnavailable,
        IndexFolderMismatch,
        IndexUnavailable,
        InvalidCursor,
        InvalidExport,
        InvalidImport,
        InvalidInput,
        MemoryConflict,
        MemoryNotFound,
        MemoryRejected,
        MemoryStoreNotFound,
        ScopeUnresolved,
        ServiceClosed,
        SessionNotFound,
        StorageFull,
        StorageNotWritable,
        StoreNotDeletable,
        StoreNotMergeable,
        safe_echo,
    )
    from ._index.chunking import chunk_markdown
    from ._models import (
        BrokenFile,
        ClearResult,
        ConsolidationLog,
        DoctorReport,
        FactRecord,
        HandoffScene,
        JournalEntry,
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
    from ._optout import OptOut
    from ._organize.models import OrganizeReport, PlannedChange, ReorgReport
    from ._porting import ExportReport, ImportEntry, ImportReport
    from ._retrieval import KnowledgeRetrieval
    from ._service import MemoryService
    from ._store.audit import AuditEvent
    from ._store.durable import write_home_cache
    from ._store.files import read_fact_file
    from ._store_config import StoreConfig
    from ._store_merge import StoreMerge
    from ._transcripts.ledger import LedgerEntry
    from ._transcripts.listing import SessionPage
    from ._transcripts.models import DistillResult, SessionSummary, SweepResult
    from ._transcripts.scrub import ScrubbedTranscript, ScrubReport
    from ._transcripts.secrets import redact_secrets
    from ._wire import JsonExtra, JsonShape, json_field, json_items

_EXPORTS: dict[str, str] = {
    "AgentHomes": "._agents.homes",
    "AsyncMemoryService": "._aio",
    "AgentChange": "._agents.install",
    "AgentStatus": "._agents.install",
    "HookTrust": "._agents.codex_trust",
    "McpCheck": "._agents.probe",
    "EmbeddingSettings": "._config",
    "LLMSettings": "._config",
    "MemoryStoreConfig": "._config",
    "build_session_context": "._agents.context",
    "redact_secrets": "._transcripts.secrets",
    "Settings": "._config",
    "AgentConfigInvalid": "._errors",
    "CofferError": "._errors",
    "EmbeddingUnavailable": "._errors",
    "IndexFolderMismatch": "._errors",
    "IndexUnavailable": "._errors",
    "ServiceClosed": "._errors",
    "InvalidCursor": "._errors",
    "InvalidInput": "._errors",
    "MemoryConflict": "._errors",
    "MemoryNotFound": "._errors",
    "MemoryRejected": "._errors",
    "MemoryStoreNotFound": "._errors",
    "ScopeUnresolved": "._errors",
    "SessionNotFound": "._errors",
    "safe_echo": "._errors",
    "StorageFull": "._errors",
    "StorageNotWritable": "._errors",
    "StoreNotDeletable": "._errors",
    "chunk_markdown": "._index.chunking",
    "write_home_cache": "._store.durable",
    "read_fact_file": "._store.files",
    "BrokenFile": "._models",
    "ClearResult": "._models",
    "ConsolidationLog": "._models",
    "DoctorReport": "._models",
    "FactRecord": "._models",
    "HandoffScene": "._models",
    "JournalFile": "._models",
    "LaneWrite": "._models",
    "MemoryFact": "._models",
    "MemoryHit": "._models",
    "MemoryScope": "._models",
    "MutationResult": "._models",
    "Page": "._models",
    "RecallResult": "._models",
    "ReindexReport": "._models",
    "ResolvedScope": "._models",
    "ResumeResult": "._models",
    "RulesView": "._models",
    "StoreInfo": "._models",
    "Target": "._models",
    "WriteReceipt": "._models",
    "OrganizeReport": "._organize.models",
    "PlannedChange": "._organize.models",
    "ReorgReport": "._organize.models",
    "KnowledgeRetrieval": "._retrieval",
    "MemoryService": "._service",
    "LedgerEntry": "._transcripts.ledger",
    "SessionPage": "._transcripts.listing",
    "DistillResult": "._transcripts.models",
    "SessionSummary": "._transcripts.models",
    "SweepResult": "._transcripts.models",
    "ScrubReport": "._transcripts.scrub",
    "ScrubbedTranscript": "._transcripts.scrub",
    "StoreNotMergeable": "._errors",
    "StoreConfig": "._store_config",
    "StoreMerge": "._store_merge",
    "JournalEntry": "._models",
    "OptOut": "._optout",
    "AuditEvent": "._store.audit",
    "InvalidExport": "._errors",
    "InvalidImport": "._errors",
    "ExportReport": "._porting",
    "ImportEntry": "._porting",
    "ImportReport": "._porting",
    "JsonExtra": "._wire",
    "JsonShape": "._wire",
    "json_field": "._wire",
    "json_items": "._wire",
}

__all__ = [
    "AgentChange",
    "AgentConfigInvalid",
    "AgentHomes",
    "AgentStatus",
    "AsyncMemoryService",
    "AuditEvent",
    "BrokenFile",
    "ClearResult",
    "CofferError",
    "ConsolidationLog",
    "DistillResult",
    "DoctorReport",
    "EmbeddingSettings",
    "EmbeddingUnavailable",
    "ExportReport",
    "FactRecord",
    "HandoffScene",
    "HookTrust",
    "ImportEntry",
    "ImportReport",
    "IndexFolderMismatch",
    "IndexUnavailable",
    "InvalidCursor",
    "InvalidExport",
    "InvalidImport",
    "InvalidInput",
    "JournalEntry",
    "JournalFile",
    "JsonExtra",
    "JsonShape",
    "KnowledgeRetrieval",
    "LLMSettings",
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
    "OptOut",
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
    "ServiceClosed",
    "SessionNotFound",
    "SessionPage",
    "SessionSummary",
    "Settings",
    "StorageFull",
    "StorageNotWritable",
    "StoreConfig",
    "StoreInfo",
    "StoreMerge",
    "StoreNotDeletable",
    "StoreNotMergeable",
    "SweepResult",
    "Target",
    "WriteReceipt",
    "__version__",
    "build_session_context",
    "chunk_markdown",
    "json_field",
    "json_items",
    "read_fact_file",
    "redact_secrets",
    "safe_echo",
    "write_home_cache",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

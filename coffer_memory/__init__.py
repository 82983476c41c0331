"""coffer-memory: one shared, local-first long-term memory for coding agents.

Facts are Markdown files with YAML frontmatter; an SQLite index makes recall fast and is
always rebuildable from the files. Start with ``MemoryService``.
"""

# Public names are imported on first use (PEP 562): ``coffer-hook`` imports a few light submodules
# and must not pay for pydantic, the index and the retrieval stack on every agent session start.
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import MemoryStoreConfig, Settings
    from .errors import (
        AgentConfigInvalid,
        CofferError,
        EmbeddingUnavailable,
        InvalidInput,
        MemoryConflict,
        MemoryNotFound,
        MemoryRejected,
        MemoryStoreNotFound,
        ScopeUnresolved,
        SessionNotFound,
    )
    from .index.chunking import chunk_markdown
    from .models import (
        ClearResult,
        DoctorReport,
        FactRecord,
        MemoryFact,
        MemoryHit,
        MemoryScope,
        MutationResult,
        Page,
        RecallResult,
        ReindexReport,
        ResolvedScope,
        StoreInfo,
    )
    from .retrieval import KnowledgeRetrieval
    from .service import MemoryService

_EXPORTS: dict[str, str] = {
    "MemoryStoreConfig": ".config",
    "Settings": ".config",
    "AgentConfigInvalid": ".errors",
    "CofferError": ".errors",
    "EmbeddingUnavailable": ".errors",
    "InvalidInput": ".errors",
    "MemoryConflict": ".errors",
    "MemoryNotFound": ".errors",
    "MemoryRejected": ".errors",
    "MemoryStoreNotFound": ".errors",
    "ScopeUnresolved": ".errors",
    "SessionNotFound": ".errors",
    "chunk_markdown": ".index.chunking",
    "ClearResult": ".models",
    "DoctorReport": ".models",
    "FactRecord": ".models",
    "MemoryFact": ".models",
    "MemoryHit": ".models",
    "MemoryScope": ".models",
    "MutationResult": ".models",
    "Page": ".models",
    "RecallResult": ".models",
    "ReindexReport": ".models",
    "ResolvedScope": ".models",
    "StoreInfo": ".models",
    "KnowledgeRetrieval": ".retrieval",
    "MemoryService": ".service",
}

__version__ = "0.1.0"

__all__ = [
    "AgentConfigInvalid",
    "ClearResult",
    "CofferError",
    "DoctorReport",
    "EmbeddingUnavailable",
    "FactRecord",
    "InvalidInput",
    "KnowledgeRetrieval",
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
    "Page",
    "RecallResult",
    "ReindexReport",
    "ResolvedScope",
    "ScopeUnresolved",
    "SessionNotFound",
    "Settings",
    "StoreInfo",
    "__version__",
    "chunk_markdown",
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

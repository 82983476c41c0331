"""coffer-memory: one shared, local-first long-term memory for coding agents.

Facts are Markdown files with YAML frontmatter; an SQLite index makes recall fast and is
always rebuildable from the files. Start with ``MemoryService``.
"""

from .config import MemoryStoreConfig, Settings
from .errors import (
    CofferError,
    EmbeddingUnavailable,
    InvalidInput,
    MemoryConflict,
    MemoryNotFound,
    MemoryRejected,
    MemoryStoreNotFound,
    ScopeUnresolved,
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

__version__ = "0.1.0"

__all__ = [
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
    "Settings",
    "StoreInfo",
    "__version__",
    "chunk_markdown",
]

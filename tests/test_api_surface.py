"""The public API is explicit and the core stays free of web and MCP imports."""

from __future__ import annotations

import json
import subprocess
import sys

import coffer_memory

EXPECTED = {
    "AgentChange",
    "AgentConfigInvalid",
    "AgentHomes",
    "AgentStatus",
    "HookTrust",
    "McpCheck",
    "AsyncMemoryService",
    "BrokenFile",
    "ConsolidationLog",
    "DistillResult",
    "HandoffScene",
    "JournalFile",
    "LaneWrite",
    "LedgerEntry",
    "OrganizeReport",
    "PlannedChange",
    "ReorgReport",
    "ResumeResult",
    "RulesView",
    "ScrubReport",
    "ScrubbedTranscript",
    "SessionPage",
    "SessionSummary",
    "StorageFull",
    "StoreNotDeletable",
    "SweepResult",
    "Target",
    "WriteReceipt",
    "ClearResult",
    "CofferError",
    "DoctorReport",
    "EmbeddingUnavailable",
    "FactRecord",
    "InvalidCursor",
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
    "JsonExtra",
    "JsonShape",
    "json_field",
    "json_items",
}


def test_all_is_pinned() -> None:
    assert set(coffer_memory.__all__) == EXPECTED
    for name in coffer_memory.__all__:
        assert hasattr(coffer_memory, name)


def test_public_names_have_docstrings() -> None:
    for name in coffer_memory.__all__:
        obj = getattr(coffer_memory, name)
        if callable(obj):
            assert obj.__doc__, name


def test_error_codes_are_the_seeds() -> None:
    codes = {
        getattr(coffer_memory, n).code
        for n in EXPECTED
        if n.endswith(("Found", "Rejected", "Unresolved", "Conflict", "Input"))
    }
    assert codes == {
        "MEMORY_STORE_NOT_FOUND",
        "MEMORY_NOT_FOUND",
        "MEMORY_REJECTED",
        "SCOPE_UNRESOLVED",
        "MEMORY_CONFLICT",
        "INVALID_INPUT",
        "SESSION_NOT_FOUND",
    }


def test_every_error_code_is_in_the_vocabulary() -> None:
    from coffer_memory import errors, vocabulary

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.CofferError)]
    assert {c.code for c in classes} - {"COFFER_ERROR"} == set(vocabulary.ERROR_CODES)


def test_core_imports_no_web_or_mcp_package() -> None:
    code = (
        "import json, sys, coffer_memory, coffer_memory.cli, coffer_memory.demo;"
        "from coffer_memory import MemoryService;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    modules = json.loads(out)
    banned = [m for m in modules if m.split(".")[0] in {"fastapi", "starlette", "mcp", "uvicorn"}]
    assert banned == []

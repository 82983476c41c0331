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
    "AuditEvent",
    "BrokenFile",
    "ConsolidationLog",
    "DistillResult",
    "HandoffScene",
    "JournalEntry",
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
    "StorageNotWritable",
    "StoreConfig",
    "StoreMerge",
    "StoreNotDeletable",
    "StoreNotMergeable",
    "SweepResult",
    "Target",
    "WriteReceipt",
    "ClearResult",
    "CofferError",
    "DoctorReport",
    "EmbeddingUnavailable",
    "FactRecord",
    "IndexFolderMismatch",
    "IndexUnavailable",
    "ServiceClosed",
    "LedgerUnavailable",
    "InvalidCursor",
    "InvalidExport",
    "InvalidImport",
    "ExportReport",
    "ImportEntry",
    "ImportReport",
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
    "OptOut",
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
    "write_home_cache",
    "EmbeddingSettings",
    "LLMSettings",
    "build_session_context",
    "redact_secrets",
    "safe_echo",
    "read_fact_file",
    "JsonExtra",
    "JsonShape",
    "json_field",
    "json_items",
    "KeyNamedTwice",
    "keys_once_each",
}

# What a plugin author imports (docs/plugins.md, docs/llm.md).
PLUGIN_API = {
    "BackendHit",
    "DocVectors",
    "IndexBackend",
    "IndexBackendFactory",
    "IndexedDoc",
    "get_index_backend",
    "get_index_backend_factories",
    "LLM",
    "Embedder",
    "EmbedderFactory",
    "GrepBackend",
    "GrepMatch",
    "LLMFactory",
    "Vector",
    "hookimpl",
    "hookspec",
    "get_embedder",
    "get_embedder_factories",
    "get_grep_backend",
    "get_grep_backends",
    "get_llm",
    "get_llm_factories",
    "get_plugin_manager",
    "reload_plugins",
    "ChatMessage",
    "Completion",
    "EmbeddingSettings",
    "LLMOutputInvalid",
    "LLMSettings",
    "LLMUnavailable",
    "TokenUsage",
    "extract_json",
}

# The only modules of the package without a leading underscore: the API, the adapters' vocabulary,
# the plugin namespace and the runnable demo. Anything else added must be private (httpx/pluggy).
PUBLIC_MODULES = {"__init__", "__main__", "vocabulary", "plugins", "demo"}


def test_all_is_pinned() -> None:
    assert set(coffer_memory.__all__) == EXPECTED
    for name in coffer_memory.__all__:
        assert hasattr(coffer_memory, name)


def test_plugin_namespace_is_pinned() -> None:
    import coffer_memory.plugins as plugins

    assert set(plugins.__all__) == PLUGIN_API
    for name in plugins.__all__:
        assert getattr(plugins, name) is not None


def test_implementation_modules_are_private() -> None:
    from pathlib import Path

    root = Path(coffer_memory.__file__).parent
    names = {
        p.stem if p.suffix == ".py" else p.name for p in root.iterdir() if p.suffix == ".py" or p.is_dir()
    }
    public = {n for n in names if not n.startswith("_") and n != "__pycache__"}
    assert public <= PUBLIC_MODULES, (
        f"make these private (leading underscore): {sorted(public - PUBLIC_MODULES)}"
    )


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
    from coffer_memory import _errors as errors
    from coffer_memory import vocabulary

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.CofferError)]
    assert {c.code for c in classes} - {"COFFER_ERROR"} == set(vocabulary.ERROR_CODES)


def test_core_imports_no_web_or_mcp_package() -> None:
    code = (
        "import json, sys, coffer_memory, coffer_memory._cli, coffer_memory.demo;"
        "from coffer_memory import MemoryService;"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    modules = json.loads(out)
    banned = [m for m in modules if m.split(".")[0] in {"fastapi", "starlette", "mcp", "uvicorn"}]
    assert banned == []

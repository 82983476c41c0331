"""The public namespace for plugin authors: hookspecs, the manager with typed getters, and the
value types an LLM or embedder plugin works with (chat messages, completions, their errors and
settings). Everything else in the package is private and may change without notice.
"""

# Names are imported on first use (PEP 562): the index imports ``plugins.manager`` and must not
# pay for pluggy until a plugin is asked for, nor ``coffer-hook`` for pydantic.
from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .._config import (
        EmbeddingSettings,
        LLMSettings,
    )
    from .._llm import (
        ChatMessage,
        Completion,
        LLMOutputInvalid,
        LLMUnavailable,
        TokenUsage,
        extract_json,
    )
    from .hookspecs import (
        LLM,
        BackendHit,
        DocVectors,
        Embedder,
        EmbedderFactory,
        GrepBackend,
        GrepMatch,
        IndexBackend,
        IndexBackendFactory,
        IndexedDoc,
        LLMFactory,
        Vector,
        hookimpl,
        hookspec,
    )
    from .manager import (
        get_embedder,
        get_embedder_factories,
        get_grep_backend,
        get_grep_backends,
        get_index_backend,
        get_index_backend_factories,
        get_llm,
        get_llm_factories,
        get_plugin_manager,
        reload_plugins,
    )

_EXPORTS: dict[str, str] = {
    "get_index_backend_factories": ".manager",
    "get_index_backend": ".manager",
    "IndexedDoc": ".hookspecs",
    "IndexBackendFactory": ".hookspecs",
    "IndexBackend": ".hookspecs",
    "BackendHit": ".hookspecs",
    "DocVectors": ".hookspecs",
    "LLM": ".hookspecs",
    "Embedder": ".hookspecs",
    "EmbedderFactory": ".hookspecs",
    "GrepBackend": ".hookspecs",
    "GrepMatch": ".hookspecs",
    "LLMFactory": ".hookspecs",
    "Vector": ".hookspecs",
    "hookimpl": ".hookspecs",
    "hookspec": ".hookspecs",
    "get_embedder": ".manager",
    "get_embedder_factories": ".manager",
    "get_grep_backend": ".manager",
    "get_grep_backends": ".manager",
    "get_llm": ".manager",
    "get_llm_factories": ".manager",
    "get_plugin_manager": ".manager",
    "reload_plugins": ".manager",
    "EmbeddingSettings": ".._config",
    "LLMSettings": ".._config",
    "ChatMessage": ".._llm",
    "Completion": ".._llm",
    "LLMOutputInvalid": ".._llm",
    "LLMUnavailable": ".._llm",
    "TokenUsage": ".._llm",
    "extract_json": ".._llm",
}

__all__ = [
    "LLM",
    "BackendHit",
    "ChatMessage",
    "Completion",
    "DocVectors",
    "Embedder",
    "EmbedderFactory",
    "EmbeddingSettings",
    "GrepBackend",
    "GrepMatch",
    "IndexBackend",
    "IndexBackendFactory",
    "IndexedDoc",
    "LLMFactory",
    "LLMOutputInvalid",
    "LLMSettings",
    "LLMUnavailable",
    "TokenUsage",
    "Vector",
    "extract_json",
    "get_embedder",
    "get_embedder_factories",
    "get_grep_backend",
    "get_grep_backends",
    "get_index_backend",
    "get_index_backend_factories",
    "get_llm",
    "get_llm_factories",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "reload_plugins",
]

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

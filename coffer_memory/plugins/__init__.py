"""The public namespace for plugin authors: hookspecs, the manager with typed getters, and the
value types an LLM or embedder plugin works with (chat messages, completions, their errors and
settings). Everything else in the package is private and may change without notice.
"""

# The LLM and settings types are imported on first use (PEP 562): `coffer-hook` imports this
# package and must not pay for pydantic on every agent session start.
from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .hookspecs import (
    LLM,
    Embedder,
    EmbedderFactory,
    GrepBackend,
    GrepMatch,
    LLMFactory,
    Vector,
    hookimpl,
    hookspec,
)

if TYPE_CHECKING:
    from .._config import EmbeddingSettings, LLMSettings
    from .._llm import ChatMessage, Completion, LLMOutputInvalid, LLMUnavailable, TokenUsage, extract_json

from .manager import (
    get_embedder,
    get_embedder_factories,
    get_grep_backend,
    get_grep_backends,
    get_llm,
    get_llm_factories,
    get_plugin_manager,
    reload_plugins,
)

_EXPORTS: dict[str, str] = {
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
    "ChatMessage",
    "Completion",
    "Embedder",
    "EmbedderFactory",
    "EmbeddingSettings",
    "GrepBackend",
    "GrepMatch",
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
    "get_llm",
    "get_llm_factories",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "reload_plugins",
]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)

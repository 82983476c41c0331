"""Plugin surface: pluggy hookspecs, the manager with typed getters, and the built-ins."""

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

__all__ = [
    "LLM",
    "Embedder",
    "EmbedderFactory",
    "GrepBackend",
    "GrepMatch",
    "LLMFactory",
    "Vector",
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

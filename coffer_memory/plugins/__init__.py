"""Plugin surface: pluggy hookspecs, the manager with typed getters, and the built-ins."""

from .hookspecs import Embedder, EmbedderFactory, GrepBackend, GrepMatch, Vector, hookimpl, hookspec
from .manager import (
    get_embedder,
    get_embedder_factories,
    get_grep_backend,
    get_grep_backends,
    get_plugin_manager,
    reload_plugins,
)

__all__ = [
    "Embedder",
    "EmbedderFactory",
    "GrepBackend",
    "GrepMatch",
    "Vector",
    "get_embedder",
    "get_embedder_factories",
    "get_grep_backend",
    "get_grep_backends",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "reload_plugins",
]

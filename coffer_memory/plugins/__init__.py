"""Plugin surface: pluggy hookspecs, the manager with typed getters, and the built-ins."""

from .hookspecs import GrepBackend, GrepMatch, hookimpl, hookspec
from .manager import get_grep_backend, get_grep_backends, get_plugin_manager, reload_plugins

__all__ = [
    "GrepBackend",
    "GrepMatch",
    "get_grep_backend",
    "get_grep_backends",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "reload_plugins",
]

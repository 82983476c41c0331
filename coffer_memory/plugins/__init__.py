"""Plugin surface: pluggy hookspecs, the manager with typed getters, and the built-ins."""

# Names are imported on first use (PEP 562): the index imports ``plugins.manager`` and must not
# pay for pluggy until a plugin is asked for.
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOOKSPECS = frozenset(
    ("LLM", "Embedder", "EmbedderFactory", "GrepBackend", "GrepMatch", "LLMFactory", "Vector", "hookimpl", "hookspec")
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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(".hookspecs" if name in _HOOKSPECS else ".manager", __name__)
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

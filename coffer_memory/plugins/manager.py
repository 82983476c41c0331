"""The one module that calls ``pm.hook``; everything else asks the typed getters here."""

from __future__ import annotations

import os
import threading
from importlib import metadata

import pluggy

from ..config import EmbeddingSettings, LLMSettings
from ..errors import InvalidInput
from . import hookspecs
from .hookspecs import LLM, Embedder, EmbedderFactory, GrepBackend, LLMFactory

ENTRY_POINT_GROUP = "coffer_memory"
DEFAULT_PLUGINS = (
    "coffer_memory.plugins.builtin.grep",
    "coffer_memory.plugins.builtin.minilm",
    "coffer_memory.plugins.builtin.multilingual_e5",
    "coffer_memory.plugins.builtin.openai_embeddings",
    "coffer_memory.plugins.builtin.openai_chat",
)
AUTO_EMBEDDERS = ("multilingual-e5", "minilm")  # what provider="auto" tries, in order (offline only)

_pm: pluggy.PluginManager | None = None
_lock = threading.Lock()


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Load the entry-point group; ``COFFER_LOAD_PLUGINS`` (comma-separated names) restricts it."""
    only = os.environ.get("COFFER_LOAD_PLUGINS")
    allowed = None if only is None else {n.strip() for n in only.split(",") if n.strip()}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is None and not pm.is_blocked(ep.name):
            pm.register(ep.load(), name=ep.name)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, built on first use (built-ins, then entry points)."""
    global _pm
    with _lock:
        if _pm is None:
            pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
            pm.add_hookspecs(hookspecs.CofferHookSpecs)
            for module_name in DEFAULT_PLUGINS:
                module = __import__(module_name, fromlist=["_"])
                pm.register(module, name=module_name)
            _load_entry_points(pm)
            _pm = pm
        return _pm


def reload_plugins() -> pluggy.PluginManager:
    """Forget the plugin manager and build it again (picks up newly installed plugins)."""
    global _pm
    with _lock:
        _pm = None
    return get_plugin_manager()


def get_grep_backends() -> dict[str, GrepBackend]:
    """Every registered grep backend by name."""
    found: dict[str, GrepBackend] = {}

    def register(backend: GrepBackend) -> None:
        found[backend.name] = backend

    get_plugin_manager().hook.register_grep_backends(register=register)
    return found


def get_grep_backend(name: str | None = None) -> GrepBackend:
    """The named backend, or the available one with the highest priority."""
    backends = get_grep_backends()
    if name and name != "auto":
        if name not in backends:
            raise InvalidInput(
                f"unknown grep backend {name!r}; known: {sorted(backends)}", field="grep_backend"
            )
        return backends[name]
    usable = [b for b in backends.values() if b.available()]
    if not usable:
        raise InvalidInput("no grep backend is available", field="grep_backend")
    return max(usable, key=lambda b: b.priority)


def get_embedder_factories() -> dict[str, EmbedderFactory]:
    """Every registered embedder factory by name."""
    found: dict[str, EmbedderFactory] = {}

    def register(name: str, factory: EmbedderFactory) -> None:
        found[name] = factory

    get_plugin_manager().hook.register_embedders(register=register)
    return found


def get_embedder(settings: EmbeddingSettings) -> Embedder | None:
    """The embedder ``settings.provider`` names, ready to use; ``None`` when there is none.

    ``"none"`` gives None; ``"auto"`` gives the first available offline built-in (None if
    the ``[vector]`` extra is not installed); an unknown name is InvalidInput.
    """
    factories = get_embedder_factories()
    if settings.provider == "none":
        return None
    if settings.provider == "auto":
        for name in AUTO_EMBEDDERS:
            if name in factories:
                embedder = factories[name](settings)
                if embedder.available():
                    return embedder
        return None
    if settings.provider not in factories:
        raise InvalidInput(
            f"unknown embedding provider {settings.provider!r}; known: auto, none, {', '.join(sorted(factories))}",
            field="embedding.provider",
        )
    return factories[settings.provider](settings)


def get_llm_factories() -> dict[str, LLMFactory]:
    """Every registered LLM factory by name."""
    found: dict[str, LLMFactory] = {}

    def register(name: str, factory: LLMFactory) -> None:
        found[name] = factory

    get_plugin_manager().hook.register_llms(register=register)
    return found


def get_llm(settings: LLMSettings) -> LLM | None:
    """The LLM ``settings.provider`` names; ``None`` for ``"none"`` (the default).

    None means no model is configured: every LLM-driven operation is then a no-op. An
    unknown name is InvalidInput. The LLM is returned even when its ``available()`` is
    false (e.g. ``openai`` without ``model``); callers check it.
    """
    if settings.provider == "none":
        return None
    factories = get_llm_factories()
    if settings.provider not in factories:
        raise InvalidInput(
            f"unknown llm provider {settings.provider!r}; known: none, {', '.join(sorted(factories))}",
            field="llm.provider",
        )
    return factories[settings.provider](settings)

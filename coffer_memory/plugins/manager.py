"""The one module that calls ``pm.hook``; everything else asks the typed getters here.

Built-ins are registered like outside plugins, but from a table: a built-in module is imported
the first time one of its hooks is called, so a keyword ``coffer recall`` never imports the HTTP
client or the ONNX embedder. An entry point that fails to load is skipped and reported
(``plugin_infos``, ``coffer plugins list``, ``coffer doctor``), never fatal.

Nothing here imports pluggy until a getter runs, and the index asks for its grep backend only
when a grep search runs (``DeferredGrepBackend``): a keyword recall never loads the entry points.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from .._errors import CofferError, EmbeddingUnavailable, IndexUnavailable, InvalidInput
from .._llm import LLMUnavailable

if TYPE_CHECKING:
    import pluggy

    from .._config import EmbeddingSettings, LLMSettings, Settings
    from .hookspecs import (
        LLM,
        Embedder,
        EmbedderFactory,
        GrepBackend,
        GrepMatch,
        IndexBackend,
        IndexBackendFactory,
        LLMFactory,
    )

log = logging.getLogger("coffer_memory")
ENTRY_POINT_GROUP = "coffer_memory"
# Built-in plugin modules and the hooks each implements (checked against the modules by a test).
BUILTIN_PLUGINS: dict[str, tuple[str, ...]] = {
    "coffer_memory.plugins.builtin.grep": ("register_grep_backends",),
    "coffer_memory.plugins.builtin.minilm": ("register_embedders",),
    "coffer_memory.plugins.builtin.multilingual_e5": ("register_embedders",),
    "coffer_memory.plugins.builtin.openai_embeddings": ("register_embedders",),
    "coffer_memory.plugins.builtin.openai_chat": ("register_llms",),
    "coffer_memory._index.pg": ("register_index_backends",),
}
DEFAULT_PLUGINS = tuple(BUILTIN_PLUGINS)
AUTO_EMBEDDERS = ("multilingual-e5", "minilm")  # what provider="auto" tries, in order (offline only)


@attrs.frozen
class PluginInfo:
    """A plugin as ``coffer plugins list`` shows it; ``error`` is set when it failed to load."""

    name: str
    source: str  # "builtin", "entry point" or "registered" (by code, e.g. a test)
    hooks: tuple[str, ...]
    version: str | None = None
    distribution: str | None = None
    error: str | None = None


_pm: pluggy.PluginManager | None = None
_lock = threading.RLock()
_dists: dict[str, tuple[str | None, str | None]] = {}  # entry-point name -> (distribution, version)
_failed: dict[str, PluginInfo] = {}
_hook_errors: dict[tuple[str, str], str] = {}  # (plugin, hook) -> why its registrations were skipped
_owners: dict[tuple[str, str], str] = {}  # (hook, registered name) -> the plugin that registered it
T = TypeVar("T")


def failure(exc: BaseException) -> str:
    """A plugin's exception on one line, its type first: pluggy's ``PluginValidationError`` (a
    hook's wrong signature) spans three lines, which split ``coffer plugins list``'s table and
    every warning."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    """Load the entry-point group; ``COFFER_LOAD_PLUGINS`` (comma-separated names) restricts it."""
    from importlib import metadata

    only = os.environ.get("COFFER_LOAD_PLUGINS")
    allowed = None if only is None else {n.strip() for n in only.split(",") if n.strip()}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue
        dist = getattr(ep, "dist", None)
        _dists[ep.name] = (dist.name, dist.version) if dist is not None else (None, None)
        try:
            pm.register(ep.load(), name=ep.name)
            _unknown_hooks(pm, ep.name)
        except Exception as exc:  # one broken plugin must not take every command down
            if pm.get_plugin(ep.name) is not None:
                pm.unregister(name=ep.name)
            error = failure(exc)
            # Not a warning: every command that loads the plugins (with vector recall on, all of
            # them) printed it, ``facts list`` too, which the plugin could never have served. It is
            # said where it may matter: in the error of a name no plugin registered (``_skipped``:
            # it may have been this one's), and by ``coffer doctor`` and ``coffer plugins list``.
            log.info("skipping plugin %s (%s): %s", ep.name, ep.value, error)
            dist_name, version = _dists[ep.name]
            _failed[ep.name] = PluginInfo(ep.name, "entry point", (), version, dist_name, error)


def _unknown_hooks(pm: pluggy.PluginManager, name: str) -> None:
    """Note the ``@hookimpl`` functions of plugin ``name`` that implement no hook of ours.

    pluggy keeps them without a word, so ``def register_embedder`` (the hook is
    ``register_embedders``) registered nothing and ``coffer plugins list`` said ``ok``. The
    plugin's other hooks stay (it may be written for a newer coffer-memory with more hooks).
    """
    from .hookspecs import CofferHookSpecs

    known = sorted(h for h in dir(CofferHookSpecs) if h.startswith("register_"))
    for caller in pm.get_hookcallers(pm.get_plugin(name)) or ():
        if not caller.has_spec():
            why = f"{caller.name} is not a coffer_memory hook (they are {', '.join(known)})"
            _hook_errors[name, caller.name] = why
            log.warning("plugin %s: %s", name, why)


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, built on first use (entry points; built-ins when first needed)."""
    import pluggy

    from . import hookspecs

    global _pm
    with _lock:
        if _pm is None:
            pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
            pm.add_hookspecs(hookspecs.CofferHookSpecs)
            _dists.clear()
            _failed.clear()
            _hook_errors.clear()
            _owners.clear()
            _load_entry_points(pm)
            _pm = pm
        return _pm


def _hook_manager(hook: str | None) -> pluggy.PluginManager:
    """The manager, with every built-in implementing ``hook`` (every built-in for None) registered."""
    pm = get_plugin_manager()
    with _lock:
        for module_name, hooks in BUILTIN_PLUGINS.items():
            wanted = hook is None or hook in hooks
            if wanted and pm.get_plugin(module_name) is None and not pm.is_blocked(module_name):
                pm.register(__import__(module_name, fromlist=["_"]), name=module_name)
    return pm


def reload_plugins() -> pluggy.PluginManager:
    """Forget the plugin manager and build it again (picks up newly installed plugins)."""
    global _pm
    with _lock:
        _pm = None
    return get_plugin_manager()


def plugin_infos() -> list[PluginInfo]:
    """Every plugin: the built-ins, the entry points (with their distribution) and those that failed."""
    from .._version import __version__

    pm = _hook_manager(None)
    for collect in (
        get_grep_backends,
        get_embedder_factories,
        get_llm_factories,
        get_index_backend_factories,
    ):
        collect()  # registration only (no model loads): a plugin whose hook fails is listed so
    infos = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        hooks = tuple(sorted(caller.name for caller in pm.get_hookcallers(plugin) or ()))
        if name in BUILTIN_PLUGINS:
            infos.append(PluginInfo(name, "builtin", hooks, __version__, "coffer-memory"))
        elif name in _dists:
            dist, version = _dists[name]
            infos.append(PluginInfo(name, "entry point", hooks, version, dist, _errors_of(name)))
        else:
            infos.append(PluginInfo(name, "registered", hooks, error=_errors_of(name)))
    return infos + list(_failed.values())


def _errors_of(plugin: str) -> str | None:
    return "; ".join(why for (name, _), why in sorted(_hook_errors.items()) if name == plugin) or None


def skipped_note(hook: str) -> str:
    """What to add to an "unknown name" error: the plugins whose ``hook`` failed, and those that
    failed to load (what they would have registered is not known): the name may be theirs."""
    why = [
        f"plugin {plugin} was skipped: {reason}"
        for (plugin, h), reason in sorted(_hook_errors.items())
        if h == hook
    ] + [f"plugin {name} failed to load: {info.error}" for name, info in sorted(_failed.items())]
    return f" ({'; '.join(why)})" if why else ""


def plugin_of(hook: str, name: str) -> str | None:
    """The plugin that registered ``name`` through ``hook`` (None if nothing did, or not yet)."""
    return _owners.get((hook, name))


def _registered(hook: str, check: Callable[..., tuple[str, T]]) -> dict[str, T]:
    """What the plugins register through ``hook``, by name, each plugin called on its own.

    One pluggy call ran every plugin in one go: a plugin that raised, or registered a value of the
    wrong kind, failed every caller (keyword recall too, when the embedders were asked for) with an
    error that did not say which plugin it was. Here such a plugin's registrations are left out,
    the others' stand, and the warning (and ``coffer plugins list``) names it. ``check`` turns
    ``register``'s arguments into (name, value) or raises TypeError.
    """
    caller = getattr(_hook_manager(hook).hook, hook)
    found: dict[str, T] = {}
    for impl in reversed(caller.get_hookimpls()):  # pluggy's own order: the last registered first
        staged: dict[str, T] = {}

        def register(*args: Any, _staged: dict[str, T] = staged) -> None:
            name, value = check(*args)
            _staged[name] = value

        try:
            impl.function(**{arg: register for arg in impl.argnames})
        except Exception as exc:  # a broken plugin must not take the others down
            why = f"{hook} failed: {failure(exc)}"
            _hook_errors[impl.plugin_name, hook] = why
            log.warning("skipping what plugin %s registers: %s", impl.plugin_name, why)
            continue
        _hook_errors.pop((impl.plugin_name, hook), None)
        for name, value in staged.items():
            found[name] = value
            _owners[(hook, name)] = impl.plugin_name
    return found


def _named_factory(name: object, factory: object = None) -> tuple[str, Any]:
    if not isinstance(name, str) or not name or not callable(factory):
        raise TypeError(f"register(name, factory) takes a name and a callable, not ({name!r}, {factory!r})")
    return name, factory


def _grep_backend(backend: object) -> tuple[str, GrepBackend]:
    from .hookspecs import GrepBackend

    if not isinstance(backend, GrepBackend) or not isinstance(backend.name, str):
        raise TypeError(
            f"register(backend) takes a GrepBackend (name, priority, available, search), not {backend!r}"
        )
    return backend.name, backend


def get_grep_backends() -> dict[str, GrepBackend]:
    """Every registered grep backend by name (a plugin whose hook fails is skipped and logged)."""
    return _registered("register_grep_backends", _grep_backend)


def get_grep_backend(name: str | None = None) -> GrepBackend:
    """The named backend, or the available one with the highest priority."""
    backends = get_grep_backends()
    if name and name != "auto":
        if name not in backends:
            raise InvalidInput(
                f"unknown grep backend {name!r}; known: {sorted(backends)}{skipped_note('register_grep_backends')}",
                field="grep_backend",
            )
        return backends[name]
    usable = [b for b in backends.values() if b.available()]
    if not usable:
        raise InvalidInput("no grep backend is available", field="grep_backend")
    return max(usable, key=lambda b: b.priority)


class DeferredGrepBackend:
    """The grep backend ``get_grep_backend(name)`` gives, looked up on its first use.

    The index holds one of these, so opening it loads no plugin: the lookup (entry points, the
    built-in module, a search for ``rg``) runs when a grep recall or ``doctor`` first needs it,
    and an unknown name is reported then.
    """

    def __init__(self, name: str | None) -> None:
        self._name = name
        self._backend: GrepBackend | None = None
        self._guard = threading.Lock()

    def resolve(self) -> GrepBackend:
        """The backend itself (looked up once; ``auto``: ``AutoGrepBackend`` over rg)."""
        with self._guard:
            if self._backend is None:
                backend = get_grep_backend(self._name)
                if not self._name or self._name == "auto":
                    from .builtin.grep import auto_backend

                    backend = auto_backend(backend)
                self._backend = backend
            return self._backend

    @property
    def name(self) -> str:
        """The backend's name."""
        return self.resolve().name

    @property
    def priority(self) -> int:
        """The backend's priority."""
        return self.resolve().priority

    def available(self) -> bool:
        """Whether the backend can run here."""
        return self.resolve().available()

    def search(self, folders: Sequence[Path], patterns: Sequence[str], *, max_lines: int) -> list[GrepMatch]:
        """The backend's matches."""
        return self.resolve().search(folders, patterns, max_lines=max_lines)

    def close(self) -> None:
        """Release what the backend holds, if it says how (``close()`` is optional)."""
        close = getattr(self._backend, "close", None)
        if callable(close):
            close()


def get_embedder_factories() -> dict[str, EmbedderFactory]:
    """Every registered embedder factory by name."""
    return _registered("register_embedders", _named_factory)


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
        known = f"unknown embedding provider {settings.provider!r}; known: auto, none, {', '.join(sorted(factories))}"
        if skipped := skipped_note("register_embedders"):  # likely the broken plugin's: degrade, not fail
            raise EmbeddingUnavailable(known + skipped, provider=settings.provider)
        raise InvalidInput(known, field="embedding.provider")
    factory = factories[settings.provider]
    plugin = plugin_of("register_embedders", settings.provider)
    try:
        embedder = factory(settings)
    except Exception as exc:  # the plugin's bug: vector recall degrades, recall stays up
        raise EmbeddingUnavailable(
            f"the embedding provider {settings.provider!r} (plugin {plugin}) failed to start: {failure(exc)}",
            provider=settings.provider,
            plugin=plugin,
        ) from exc
    from .hookspecs import Embedder as EmbedderProtocol  # pluggy only once a getter runs

    if not isinstance(
        embedder, EmbedderProtocol
    ):  # a factory that forgot its return: said, not "install ..."
        raise EmbeddingUnavailable(
            f"the embedding provider {settings.provider!r} (plugin {plugin}) returned "
            f"{type(embedder).__name__}, not an Embedder",
            provider=settings.provider,
            plugin=plugin,
        )
    return embedder


def get_llm_factories() -> dict[str, LLMFactory]:
    """Every registered LLM factory by name."""
    return _registered("register_llms", _named_factory)


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
            f"unknown llm provider {settings.provider!r}; known: none, {', '.join(sorted(factories))}"
            f"{skipped_note('register_llms')}",
            field="llm.provider",
        )
    plugin = plugin_of("register_llms", settings.provider)
    try:
        llm = factories[settings.provider](settings)
    except CofferError:
        raise
    except Exception as exc:  # the plugin's bug: said as the model being unavailable, naming it
        raise LLMUnavailable(
            f"the LLM provider {settings.provider!r} (plugin {plugin}) failed to start: {failure(exc)}",
            model=settings.model,
        ) from exc
    from .hookspecs import LLM as LLMProtocol  # pluggy only once a getter runs

    if not isinstance(llm, LLMProtocol):  # else "unexpected AttributeError" where its name was first read
        raise LLMUnavailable(
            f"the LLM provider {settings.provider!r} (plugin {plugin}) returned {type(llm).__name__}, not an LLM",
            model=settings.model,
        )
    return llm


def get_index_backend_factories() -> dict[str, IndexBackendFactory]:
    """Every registered shared index backend factory by name."""
    return _registered("register_index_backends", _named_factory)


def get_index_backend(settings: Settings) -> IndexBackend | None:
    """The shared index backend ``settings.index.backend`` names; None for ``"sqlite"`` (the default:
    the machine-local index alone). An unknown name is InvalidInput."""
    name = settings.index.backend
    if name == "sqlite":
        return None
    factories = get_index_backend_factories()
    if name not in factories:
        raise InvalidInput(
            f"unknown index backend {name!r}; known: sqlite, {', '.join(sorted(factories))}"
            f"{skipped_note('register_index_backends')}",
            field="index.backend",
        )
    try:
        return factories[name](settings)
    except CofferError:  # the built-in's own, typed (a missing URL, a password in config.toml)
        raise
    except Exception as exc:  # a plugin's bug: typed, naming it, not "unexpected ZeroDivisionError"
        plugin = plugin_of("register_index_backends", name)
        raise IndexUnavailable(name, f"its plugin {plugin} failed to start: {failure(exc)}") from exc

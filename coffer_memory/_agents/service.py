"""``Agents``: agent integration (install, uninstall, status, native-memory toggles).

A component of ``MemoryService`` (reachable as ``svc.integrations``; ``svc.agents()`` keeps listing them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from .._config import Settings
from .._errors import AgentConfigInvalid, InvalidInput
from .._home import HomeLayout
from .._indexing import IndexHandle
from .._store.lock import store_lock
from .health import CheckCache, build_status, installed_home
from .homes import AGENTS, AgentHomes
from .install import AgentChange, AgentSpec, AgentStatus, Commands, EditSession, agent_spec
from .probe import DEFAULT_TIMEOUT_SECONDS, MCP_EXTRA_COMMAND, mcp_sdk_problem
from .registry import AgentRecord, AgentRegistry

INSTALL_PARTS = ("hooks", "mcp")
NATIVE_PARTS = ("native_memory",)


def _no_sdk(spec: AgentSpec, problem: str) -> InvalidInput:
    """The refusal to register a server that cannot start, with the two ways on."""
    hooks = (
        f", or register the session hooks alone: coffer agents install {spec.name} --hooks-only"
        " (hooks_only=true over REST and Python)"
        if spec.session_start
        else ""
    )
    return InvalidInput(
        f"not installed for {spec.label}: coffer-mcp cannot start, because {problem}. "
        f"Install it: {MCP_EXTRA_COMMAND} (then run this again){hooks}",
        field="hooks_only",
    )


def _no_native_memory(spec: AgentSpec) -> InvalidInput:
    return InvalidInput(
        f"{spec.label} has no native memory setting coffer can switch off", field="disable_native_memory"
    )


class Agents:
    """Agent integration of one coffer home.

    The agents' directories come from ``agent_homes`` when set, else from the environment at each
    call (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``XDG_CONFIG_HOME``, ``HOME``...).

    ``index`` None is for ``uninstall_agent`` where coffer's home does not exist (``coffer agents
    uninstall`` after ``~/.coffer`` was deleted): nothing is locked or audited there, so the
    uninstall makes no home (with no registry, coffer's entries are removed with nothing to record).
    """

    def __init__(
        self, settings: Settings, index: IndexHandle | None, agent_homes: AgentHomes | None = None
    ) -> None:
        self.settings = settings
        self.index = index
        self.agent_homes = agent_homes
        self._lock = threading.RLock()

    def _homes(self) -> AgentHomes:
        return self.agent_homes if self.agent_homes is not None else AgentHomes.from_env()

    def _audit(self, event: str, store: None, **details: Any) -> None:
        # No index: an uninstall where coffer has no home (``index`` None), with no log to add to.
        if self.index is None:
            return
        with self.index.lock:
            self.index.audit(event, store, None, details)

    @contextmanager
    def _agents_locked(self) -> Iterator[AgentRegistry]:
        # One writer at a time across processes: two installs must not interleave their reads.
        # Without a home (``index`` None) there is no registry to guard, and the lock would make one.
        if self.index is None:
            with self._lock:
                yield AgentRegistry(self.settings.home)
            return
        with self._lock, store_lock(HomeLayout(self.settings.home).agents_lock):
            yield AgentRegistry(self.settings.home)

    def _session(self, name: str, record: AgentRecord, *, force: bool = False) -> EditSession:
        return EditSession(self._homes(), record, Commands.of(name, self.settings.home), force=force)

    def _change(
        self,
        name: str,
        action: Literal["install", "uninstall", "native_memory"],
        written: list[Path],
        session: EditSession,
    ) -> AgentChange:
        return AgentChange(
            agent=name,
            action=action,
            changed=tuple(written),
            status=self.agent_status(name),
            notes=tuple(session.notes),
            kept_backups=tuple(session.kept_backups),
            removed_folders=tuple(session.removed_folders),
        )

    # -- reading -------------------------------------------------------------------------------
    def agents(
        self, *, check_mcp: bool = False, timeout: float = DEFAULT_TIMEOUT_SECONDS
    ) -> list[AgentStatus]:
        """The status of every known agent, installed or not.

        ``check_mcp`` starts each distinct registered MCP server once (see ``agent_status``), the
        agents' servers at the same time: the slowest start, not their sum, is what it costs.
        """
        homes, cache = self._homes(), CheckCache()

        def status(name: str) -> AgentStatus:
            return build_status(
                name, homes, self.settings.home, check_mcp=check_mcp, timeout=timeout, cache=cache
            )

        if not check_mcp:  # reading files only: threads would cost more than they save
            return [status(name) for name in AGENTS]
        with ThreadPoolExecutor(max_workers=len(AGENTS), thread_name_prefix="coffer-agent-status") as pool:
            return list(pool.map(status, AGENTS))

    def agent_status(
        self, name: str, *, check_mcp: bool = False, timeout: float = DEFAULT_TIMEOUT_SECONDS
    ) -> AgentStatus:
        """Where coffer's integration with ``name`` stands (``InvalidInput`` for an unknown agent).

        ``check_mcp`` starts the registered MCP server with its env and asks it ``initialize`` and
        ``tools/list`` within ``timeout`` seconds (``AgentStatus.mcp_check``).
        """
        agent_spec(name)
        return build_status(name, self._homes(), self.settings.home, check_mcp=check_mcp, timeout=timeout)

    def _installed_registry(self, name: str, own: AgentRegistry) -> AgentRegistry:
        """The registry of the home the installed entries point at (``own`` when it is ours)."""
        reader = self._session(name, AgentRecord())
        try:
            home = installed_home(agent_spec(name), reader)
        except AgentConfigInvalid:
            home = None
        return own if home is None or home == own.path.parent else AgentRegistry(home)

    # -- writing -------------------------------------------------------------------------------
    def install_agent(
        self,
        name: str,
        *,
        disable_native_memory: bool | None = None,
        hooks_only: bool = False,
        force: bool = False,
    ) -> AgentChange:
        """Install coffer's hooks and MCP entry for ``name`` (idempotent; an old path is replaced).

        ``disable_native_memory`` also switches the agent's own memory off (``True``) or back
        (``False``); ``None`` keeps the stored setting. Audited as ``agent_hook_installed`` (and
        ``agent_native_memory_disabled`` / ``_restored``) with the files changed.

        The MCP SDK is the ``[mcp]`` extra: without it in this Python the registered
        ``coffer-mcp`` could not start, so the install is refused (``InvalidInput`` naming
        ``pip install 'coffer-memory[mcp]'``) before any file is touched. ``hooks_only`` installs
        the session hooks alone instead (and removes an MCP entry of coffer's); a later install
        without it adds the server.

        A ``coffer`` MCP entry that is the user's own (it does not run ``coffer-mcp``) is refused
        (``AgentConfigInvalid`` naming the file and what the entry runs) unless ``force``: then it
        is replaced, kept in ``agents.json`` for uninstall to put back, and ``AgentChange.notes``
        says so.
        """
        spec = agent_spec(name)
        if disable_native_memory and not spec.native_memory:
            raise _no_native_memory(spec)
        if hooks_only and not spec.session_start:
            raise InvalidInput(
                f"{spec.label} has no session hooks: its integration is the MCP server alone",
                field="hooks_only",
            )
        if not hooks_only and (problem := mcp_sdk_problem()) is not None:
            raise _no_sdk(spec, problem)
        with self._agents_locked() as registry:
            records = registry.load()
            # Installed for another home: its record (what the user had) moves here with the entries.
            other = self._installed_registry(name, registry)
            others = other.load() if other is not registry else {}
            record = records.setdefault(name, others.pop(name, AgentRecord()))
            was = record.disable_native_memory
            if disable_native_memory is not None:
                record.disable_native_memory = disable_native_memory
            record.hooks_only = hooks_only
            session = self._session(name, record, force=force)
            session.install(spec, mcp=not hooks_only)
            session.native_memory(spec, record.disable_native_memory)
            written = session.commit(registry, records)
            if other is not registry:
                other.save(others)
            self._audit_change(name, "agent_hook_installed", session.changed_by(INSTALL_PARTS, written))
            native = session.changed_by(NATIVE_PARTS, written)
            if native or was != record.disable_native_memory:
                event = "disabled" if record.disable_native_memory else "restored"
                self._audit(f"agent_native_memory_{event}", None, agent=name, files=[str(p) for p in native])
        return self._change(name, "install", written, session)

    def uninstall_agent(self, name: str) -> AgentChange:
        """Remove coffer's hooks and MCP entry and restore the native-memory settings.

        Each file is left as it was before install (byte for byte when nothing else changed in it;
        a file coffer created is removed, and so are the folders it made, when empty). The ``.bak``
        install kept goes when the file is restored to the same bytes; one that differs stays
        (``AgentChange.kept_backups``). Audited as ``agent_hook_uninstalled`` (and
        ``agent_native_memory_restored``).
        """
        spec = agent_spec(name)
        with self._agents_locked() as own:
            registry = self._installed_registry(name, own)  # the home whose record knows what to restore
            records = registry.load()
            record = records.setdefault(name, AgentRecord())
            was = record.disable_native_memory
            record.disable_native_memory = False
            record.hooks_only = False
            session = self._session(name, record)
            session.uninstall(spec)
            session.native_memory(spec, False)
            written = session.commit(registry, records)
            self._audit_change(name, "agent_hook_uninstalled", session.changed_by(INSTALL_PARTS, written))
            native = session.changed_by(NATIVE_PARTS, written)
            if native or was:
                self._audit("agent_native_memory_restored", None, agent=name, files=[str(p) for p in native])
        return self._change(name, "uninstall", written, session)

    def set_native_memory(self, name: str, disabled: bool) -> AgentChange:
        """Switch the agent's own memory off (``disabled=True``) or restore the user's settings.

        The setting is kept in ``<COFFER_HOME>/agents.json``; OpenCode has no such toggle
        (``InvalidInput``).
        """
        spec = agent_spec(name)
        if not spec.native_memory:
            raise _no_native_memory(spec)
        with self._agents_locked() as registry:
            records = registry.load()
            record = records.setdefault(name, AgentRecord())
            was = record.disable_native_memory
            record.disable_native_memory = disabled
            session = self._session(name, record)
            session.native_memory(spec, disabled)
            written = session.commit(registry, records)
            if written or was != disabled:
                event = "disabled" if disabled else "restored"
                self._audit(f"agent_native_memory_{event}", None, agent=name, files=[str(p) for p in written])
        return self._change(name, "native_memory", written, session)

    def _audit_change(self, name: str, event: str, files: list[Path]) -> None:
        if files:  # an install that changed nothing did not install anything
            self._audit(event, None, agent=name, files=[str(p) for p in files])

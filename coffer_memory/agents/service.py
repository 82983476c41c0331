"""``Agents``: agent integration (install, uninstall, status, native-memory toggles).

A component of ``MemoryService`` (reachable as ``svc.integrations``; ``svc.agents()`` keeps listing them).
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import AgentConfigInvalid, InvalidInput
from ..home import HomeLayout
from ..indexing import IndexHandle
from ..store.lock import store_lock
from .homes import AGENTS, AgentHomes
from .install import (
    HOOK_SCRIPT,
    MCP_SCRIPT,
    AgentChange,
    AgentSpec,
    AgentStatus,
    Commands,
    EditSession,
    agent_spec,
    script_path,
)
from .registry import AgentRecord, AgentRegistry

INSTALL_PARTS = ("hooks", "mcp")
NATIVE_PARTS = ("native_memory",)


def _no_native_memory(spec: AgentSpec) -> InvalidInput:
    return InvalidInput(
        f"{spec.label} has no native memory setting coffer can switch off", field="disable_native_memory"
    )


class Agents:
    """Agent integration of one coffer home.

    The agents' directories come from ``agent_homes`` when set, else from the environment at each
    call (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``XDG_CONFIG_HOME``, ``HOME``...).
    """

    def __init__(self, settings: Settings, index: IndexHandle, agent_homes: AgentHomes | None = None) -> None:
        self.settings = settings
        self.index = index
        self.agent_homes = agent_homes
        self._lock = threading.RLock()

    def _homes(self) -> AgentHomes:
        return self.agent_homes if self.agent_homes is not None else AgentHomes.from_env()

    def _audit(self, event: str, store: None, **details: Any) -> None:
        with self.index.lock:
            self.index.audit(event, store, None, details)

    @contextmanager
    def _agents_locked(self) -> Iterator[AgentRegistry]:
        # One writer at a time across processes: two installs must not interleave their reads.
        with self._lock, store_lock(HomeLayout(self.settings.home).agents_lock):
            yield AgentRegistry(self.settings.home)

    def _session(self, name: str, record: AgentRecord) -> EditSession:
        return EditSession(self._homes(), record, Commands.of(name, self.settings.home))

    # -- reading -------------------------------------------------------------------------------
    def agents(self) -> list[AgentStatus]:
        """The status of every known agent, installed or not."""
        records = AgentRegistry(self.settings.home).load()
        return [self._status(name, records.get(name, AgentRecord())) for name in AGENTS]

    def agent_status(self, name: str) -> AgentStatus:
        """Where coffer's integration with ``name`` stands (``InvalidInput`` for an unknown agent)."""
        agent_spec(name)
        return self._status(name, AgentRegistry(self.settings.home).load().get(name, AgentRecord()))

    def _status(self, name: str, record: AgentRecord) -> AgentStatus:
        spec = agent_spec(name)
        session = self._session(name, copy.deepcopy(record))  # a dry run: its record is thrown away
        notes = list(spec.notes)
        hooks = mcp = up_to_date = False
        try:
            hooks = spec.hooks is not None and session.hooks_present(spec.hooks)
            mcp = all(session.present(s) for s in spec.install if s.part == "mcp")
            session.install(spec)
            session.native_memory(spec, record.disable_native_memory)
            up_to_date = not session.plan()
            notes += session.overrides(spec)
        except AgentConfigInvalid as exc:
            notes.append(exc.message)
        notes += self._script_notes(spec)
        installed = mcp and (hooks or spec.hooks is None)
        return AgentStatus(
            name=name,
            label=spec.label,
            installed=installed,
            hooks_supported=spec.hooks is not None,
            hooks_installed=hooks,
            mcp_registered=mcp,
            native_memory_supported=bool(spec.native_memory),
            disable_native_memory=record.disable_native_memory,
            up_to_date=installed and up_to_date,
            hook_command=session.commands.hook if spec.hooks is not None else None,
            mcp_command=session.commands.mcp,
            files=spec.files(session.homes),
            notes=tuple(notes),
        )

    @staticmethod
    def _script_notes(spec: AgentSpec) -> list[str]:
        scripts = [HOOK_SCRIPT, MCP_SCRIPT] if spec.hooks is not None else [MCP_SCRIPT]
        return [
            f"{script} is not installed at {path}: reinstall coffer-memory (with the [mcp] extra)"
            for script in scripts
            if not os.access(path := script_path(script), os.X_OK)
        ]

    # -- writing -------------------------------------------------------------------------------
    def install_agent(self, name: str, *, disable_native_memory: bool | None = None) -> AgentChange:
        """Install coffer's hooks and MCP entry for ``name`` (idempotent; an old path is replaced).

        ``disable_native_memory`` also switches the agent's own memory off (``True``) or back
        (``False``); ``None`` keeps the stored setting. Audited as ``agent_hook_installed`` (and
        ``agent_native_memory_disabled`` / ``_restored``) with the files changed.
        """
        spec = agent_spec(name)
        if disable_native_memory and not spec.native_memory:
            raise _no_native_memory(spec)
        with self._agents_locked() as registry:
            records = registry.load()
            record = records.setdefault(name, AgentRecord())
            was = record.disable_native_memory
            if disable_native_memory is not None:
                record.disable_native_memory = disable_native_memory
            session = self._session(name, record)
            session.install(spec)
            session.native_memory(spec, record.disable_native_memory)
            written = session.commit(registry, records)
            self._audit_change(name, "agent_hook_installed", session.changed_by(INSTALL_PARTS, written))
            native = session.changed_by(NATIVE_PARTS, written)
            if native or was != record.disable_native_memory:
                event = "disabled" if record.disable_native_memory else "restored"
                self._audit(f"agent_native_memory_{event}", None, agent=name, files=[str(p) for p in native])
        return AgentChange(
            agent=name, action="install", changed=tuple(written), status=self.agent_status(name)
        )

    def uninstall_agent(self, name: str) -> AgentChange:
        """Remove coffer's hooks and MCP entry and restore the native-memory settings.

        Each file is left as it was before install (byte for byte when nothing else changed in it;
        a file coffer created is removed). Audited as ``agent_hook_uninstalled`` (and
        ``agent_native_memory_restored``).
        """
        spec = agent_spec(name)
        with self._agents_locked() as registry:
            records = registry.load()
            record = records.setdefault(name, AgentRecord())
            was = record.disable_native_memory
            record.disable_native_memory = False
            session = self._session(name, record)
            session.uninstall(spec)
            session.native_memory(spec, False)
            written = session.commit(registry, records)
            self._audit_change(name, "agent_hook_uninstalled", session.changed_by(INSTALL_PARTS, written))
            native = session.changed_by(NATIVE_PARTS, written)
            if native or was:
                self._audit("agent_native_memory_restored", None, agent=name, files=[str(p) for p in native])
        return AgentChange(
            agent=name, action="uninstall", changed=tuple(written), status=self.agent_status(name)
        )

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
        return AgentChange(
            agent=name, action="native_memory", changed=tuple(written), status=self.agent_status(name)
        )

    def _audit_change(self, name: str, event: str, files: list[Path]) -> None:
        if files:  # an install that changed nothing did not install anything
            self._audit(event, None, agent=name, files=[str(p) for p in files])

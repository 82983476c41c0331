"""MemoryService: the facade every face (Python, CLI, REST, MCP) uses.

A facade over components built with explicit collaborators (no mixins):

    Settings -> IndexHandle (SQLite index, retrieval, audit; one lock)
             -> Writer (store/writer.py: the one write transaction) -> Targets (store= | cwd + scope)
    facts, lanes, stores, organizer, transcripts, integrations: each gets what it needs

Today's method names are thin delegations to those components; the components are public too
(``svc.facts``, ``svc.lanes``, ``svc.store_admin``, ``svc.organizer``, ``svc.transcripts``,
``svc.integrations``, ``svc.porting``; see ``docs/concepts.md``).

The code is three classes, each deriving from the one before (one line, no mixins):
``_service_parts.ServiceParts`` composes the components and owns their lifecycle (``close``);
``_service_lanes.LaneCalls`` adds the calls on the facts and the other lanes; ``MemoryService``
here adds the audit log, stores, organizer, agents and porting. The last two only forward.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs

from ._audit_pages import audit_events, audit_page
from ._service_lanes import LaneCalls
from ._store.paths import GLOBAL_STORE
from ._targets import PathLike
from .vocabulary import MCP_PROBE_TIMEOUT_SECONDS, Scope

if TYPE_CHECKING:  # the components below are imported when first used (``_service_parts.component``)
    from ._agents.install import AgentChange, AgentStatus
    from ._models import DoctorReport, FactRecord, LaneWrite, Page, ReindexReport, StoreInfo
    from ._optout import OptOut
    from ._organize.models import OrganizeReport, ReorgReport
    from ._porting import ExportReport, ImportReport
    from ._porting.apply import Progress as ImportProgress
    from ._porting.models import ExportFormat, ImportKind
    from ._store.audit import AuditEvent
    from ._store_config import StoreConfig
    from ._store_merge import StoreMerge
    from ._transcripts.ledger import LedgerEntry
    from ._transcripts.listing import SessionPage
    from ._transcripts.models import DistillResult, SessionSummary, SweepResult
    from ._transcripts.scrub import ScrubbedTranscript

__all__ = ["MemoryService", "Scope"]


class MemoryService(LaneCalls):
    """Remember, recall, list, edit and delete facts, and keep the lanes beside them.

    ``MemoryService(home=None)`` uses ``$COFFER_HOME``, else ``~/.coffer``; pass
    ``settings=Settings.load(...)`` for more control. Thread-safe; also a context manager.
    """

    # -- audit ---------------------------------------------------------------------------------
    def audit_events(
        self,
        store: str | None = None,
        limit: int = 100,
        *,
        event: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> list[dict[str, Any]]:
        """The newest audit events as dicts, newest first, filtered by store, event and time."""
        return audit_events(
            self.index.settings, self.index.audit_log, store, limit, event=event, since=since, until=until
        )

    def audit(
        self,
        *,
        store: str | None = None,
        event: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[AuditEvent]:
        """One page of the audit log (``<home>/audit/``), newest first; ``since`` inclusive, ``until``
        exclusive (datetimes, ISO 8601, or ``30m``/``2h``/``7d`` ago).

        The stores it covers are reconciled first, so an edit made outside coffer that no read
        has seen yet is in the answer (``memory_updated``, actor ``external``).
        """
        names = [store] if store is not None else [*self.store_admin.names(), *self.index.indexed_stores()]
        for name in dict.fromkeys(names):  # an indexed store whose folder is gone: store_deleted, external
            self.index.refresh(self.targets.paths(name).name)
        return audit_page(
            self.index.settings,
            self.index.audit_log,
            store=store,
            event=event,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )

    # -- store_admin ---------------------------------------------------------------------------
    def store_info(self, store: str) -> StoreInfo:
        """One store's identity, display metadata and fact count."""
        return self.store_admin.store_info(store)

    def stores(self) -> list[StoreInfo]:
        """Every store that exists on disk."""
        return self.store_admin.stores()

    def set_label(self, store: str, label: str) -> StoreInfo:
        """Set a store's display label (the store name never changes)."""
        return self.store_admin.set_label(store, label)

    def clear_label(self, store: str) -> StoreInfo:
        """Remove a store's label; the display name falls back to the project root's basename."""
        return self.store_admin.clear_label(store)

    def delete_store(self, store: str) -> StoreInfo:
        """Delete a project store (folder, index rows, label, root; audited); returns it as it was."""
        return self.store_admin.delete_store(store)

    def merge_stores(
        self,
        source: str,
        into: str,
        *,
        dry_run: bool = False,
        cwd: PathLike | None = None,
        checkout: bool = True,
    ) -> StoreMerge:
        """Merge project store ``source`` into ``into`` and retire ``source`` (``Stores.merge``);
        ``into`` may be the not yet written store of the checkout at ``cwd`` (the current directory
        by default; ``checkout=False``: none, for a caller whose working directory is not this
        process's)."""
        return self.store_admin.merge(source, into, dry_run=dry_run, cwd=cwd, checkout=checkout)

    def store_config(self, store: str) -> StoreConfig:
        """A store's configuration as it runs, and the keys it sets itself (``Stores.config``)."""
        return self.store_admin.config(store)

    def set_store_config(self, store: str, changes: Mapping[str, Any]) -> StoreConfig:
        """Change a store's own settings; ``None`` removes a key (``Stores.set_config``)."""
        return self.store_admin.set_config(store, changes)

    def reindex(
        self,
        store: str | None = None,
        *,
        rebuild: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> list[ReindexReport]:
        """Full reconcile of one store or all; ``rebuild`` drops the store's index rows first."""
        return self.store_admin.reindex(store, rebuild=rebuild, progress=progress)

    def startup_sweep(self) -> list[ReindexReport]:
        """Reconcile every store once (what servers run at start-up)."""
        return self.store_admin.startup_sweep()

    def doctor(
        self,
        *,
        progress: Callable[[str, int, int], None] | None = None,
        mcp_timeout: float = MCP_PROBE_TIMEOUT_SECONDS,
    ) -> DoctorReport:
        """Compare the index with the files, list broken files and links, say which grep backend
        runs, and start every installed agent's MCP server to see that it answers (within
        ``mcp_timeout`` seconds); a project's own ``coffer`` MCP entry that an agent runs instead
        (in the current directory or a store's repository) is a problem too.

        Each store is first brought up to date as any read does; ``progress(store, done, total)``
        is called while that re-indexes files (re-embedding what an interrupted run left, say).
        """
        from ._doctor import check_agents
        from ._optout import optout_for_roots

        report = self.store_admin.doctor(progress=progress)
        here = [Path(os.getcwd())] if os.path.isdir(".") else []
        projects = dict.fromkeys([*here, *(Path(s.project_root) for s in report.stores if s.project_root)])
        agents = check_agents(self.integrations.agents, self.agent_homes, list(projects), mcp_timeout)
        exclude = self.settings.projects.exclude
        opted_out = tuple(
            f"{s.name} ({o.describe()})"
            for s in report.stores
            if s.project_root and (o := optout_for_roots([Path(s.project_root)], exclude)) is not None
        )
        return attrs.evolve(
            report,
            agents=agents["agents"],
            agent_problems=agents["agent_problems"],
            opted_out=opted_out,
            # The distillation ledger's repairs too (another program's table in its place, say).
            index_repairs=(*report.index_repairs, *self.transcripts.ledger.check()),
        )

    def project_optout(self, cwd: PathLike | None = None) -> OptOut | None:
        """Why the repository holding ``cwd`` (default: the current directory) opted out of coffer's
        automation (session-start bundle, distillation, sweeps), or None when it takes part."""
        from ._optout import optout_for

        return optout_for(cwd if cwd is not None else os.getcwd(), self.settings.projects.exclude)

    def repository_offers(self, cwd: PathLike | None = None) -> list[str]:
        """Other stores that hold memory of the repository at ``cwd`` (default: the current
        directory): a second clone's, or the checkout this one was copied from. One sentence each,
        with the command that merges it into this checkout's store; empty outside a git repository.

        Such a store is never searched or merged by itself (a second checkout may go its own way),
        so a recall here does not see it; this says where that memory is."""
        return [
            line for target in self.targets.find_project(cwd) for line in self.targets.offer_lines(target)
        ]

    # -- organizer -----------------------------------------------------------------------------
    def organize(self, store: str, *, dry_run: bool = False) -> OrganizeReport:
        """File the store's inbox into topic documents and rules (``dry_run``: diffs only, no writes)."""
        return self.organizer.organize(store, dry_run=dry_run)

    def reorganize(self, store: str, *, dry_run: bool = False) -> ReorgReport:
        """Merge duplicate and split long topic documents with a bounded tool loop."""
        return self.organizer.reorganize(store, dry_run=dry_run)

    # -- transcripts ---------------------------------------------------------------------------
    def list_transcripts(self, agent: str, **filters: Any) -> SessionPage:
        """Past sessions of ``agent``: ``search``, ``project``, ``started_after``/``started_before``,"""
        return self.transcripts.list_transcripts(agent, **filters)

    def transcript_summary(self, agent: str, session_id: str) -> SessionSummary:
        """One session's summary (``SessionNotFound`` when there is no such session)."""
        return self.transcripts.transcript_summary(agent, session_id)

    def show_transcript(self, agent: str, session_id: str) -> ScrubbedTranscript:
        """A session as distillation would send it: prose only, outputs dropped, secrets redacted."""
        return self.transcripts.show_transcript(agent, session_id)

    def find_session(self, session_id: str, agent: str | None = None) -> SessionSummary:
        """A session by id, looked up in every agent's files unless ``agent`` is given."""
        return self.transcripts.find_session(session_id, agent)

    def distill_session(
        self, agent: str, session_id: str, *, cwd: str | os.PathLike[str] | None = None, dry_run: bool = False
    ) -> DistillResult:
        """Distill one session into its project's journal (one LLM call; idempotent by content)."""
        return self.transcripts.distill_session(agent, session_id, cwd=cwd, dry_run=dry_run)

    def end_session(
        self, agent: str, session_id: str, *, cwd: str | os.PathLike[str] | None = None
    ) -> DistillResult:
        """What the SessionEnd hook and REST route run: distill the session that just ended."""
        return self.transcripts.end_session(agent, session_id, cwd=cwd)

    def sweep(
        self,
        agent: str | None = None,
        *,
        limit: int = 20,
        min_idle_seconds: int = 600,
        dry_run: bool = False,
        progress: Callable[[DistillResult], None] | None = None,
    ) -> SweepResult:
        """Distill every session (of ``agent``, or of all agents) not yet in the ledger."""
        return self.transcripts.sweep(
            agent, limit=limit, min_idle_seconds=min_idle_seconds, dry_run=dry_run, progress=progress
        )

    def forget_session(
        self, session_id: str, *, cwd: str | os.PathLike[str] | None = None, store: str | None = None
    ) -> list[LaneWrite]:
        """Delete every journal entry distilled from ``session_id`` in a project store.

        Only journal entries go: facts remembered with that ``origin_session_id`` stay (see
        ``session_facts``), and so do the ledger row (a sweep must not distill the session again),
        the audit log and the consolidation log (history of what was done).
        """
        return self.transcripts.forget_session(session_id, cwd=cwd, store=store)

    def session_facts(
        self, session_id: str, *, cwd: str | os.PathLike[str] | None = None, store: str | None = None
    ) -> list[FactRecord]:
        """The facts remembered with ``origin_session_id`` ``session_id`` (``remember(...,
        origin_session_id=...)``, the MCP tool's ``session_id``) in the project store of ``cwd``
        (or ``store``) and in the global store, oldest first: what ``forget_session`` keeps."""
        from ._transcripts.service import check_session_id

        check_session_id(session_id)
        project = self.targets.project(store=store, cwd=cwd).store
        return self.facts.session_facts(session_id, dict.fromkeys([project, GLOBAL_STORE]))

    def distilled_sessions(
        self, agent: str | None = None, session_id: str | None = None
    ) -> list[LedgerEntry]:
        """The ledger: what was distilled, when, into which store, with how many tokens."""
        return self.transcripts.distilled_sessions(agent, session_id)

    # -- integrations --------------------------------------------------------------------------
    def agents(
        self, *, check_mcp: bool = False, timeout: float = MCP_PROBE_TIMEOUT_SECONDS
    ) -> list[AgentStatus]:
        """The status of every known agent, installed or not (``check_mcp``: start each registered
        MCP server once and ask it for its tools)."""
        return self.integrations.agents(check_mcp=check_mcp, timeout=timeout)

    def agent_status(
        self, name: str, *, check_mcp: bool = False, timeout: float = MCP_PROBE_TIMEOUT_SECONDS
    ) -> AgentStatus:
        """Where coffer's integration with ``name`` stands (``InvalidInput`` for an unknown agent);
        ``check_mcp`` starts its registered MCP server and asks it ``initialize`` + ``tools/list``."""
        return self.integrations.agent_status(name, check_mcp=check_mcp, timeout=timeout)

    def install_agent(
        self,
        name: str,
        *,
        disable_native_memory: bool | None = None,
        hooks_only: bool = False,
        force: bool = False,
    ) -> AgentChange:
        """Install coffer's hooks and MCP entry for ``name`` (idempotent; an old path is replaced).

        Refused (``InvalidInput`` naming ``pip install 'coffer-memory[mcp]'``) when the MCP SDK is
        not installed; ``hooks_only=True`` installs the session hooks alone. A ``coffer`` MCP entry
        of the user's own is refused (``AgentConfigInvalid``) unless ``force`` (then replaced, and put
        back by uninstall).
        """
        return self.integrations.install_agent(
            name, disable_native_memory=disable_native_memory, hooks_only=hooks_only, force=force
        )

    def uninstall_agent(self, name: str) -> AgentChange:
        """Remove coffer's hooks and MCP entry and restore the native-memory settings."""
        return self.integrations.uninstall_agent(name)

    def set_native_memory(self, name: str, disabled: bool) -> AgentChange:
        """Switch the agent's own memory off (``disabled=True``) or restore the user's settings."""
        return self.integrations.set_native_memory(name, disabled)

    # -- porting ------------------------------------------------------------------------------
    def export_memory(
        self,
        dest: PathLike | IO[bytes],
        *,
        stores: Iterable[str] | None = None,
        format: ExportFormat = "zip",
    ) -> ExportReport:
        """Export the truth files of ``stores`` (default: all) to a file or binary stream, as a zip
        with a manifest or as JSONL."""
        return self.porting.export_memory(dest, stores=stores, format=format)

    def import_memory(
        self,
        source: PathLike | None = None,
        *,
        kind: ImportKind | None = None,
        store: str | None = None,
        dry_run: bool = False,
        progress: ImportProgress | None = None,
        reading: Callable[[int, int | None], None] | None = None,
    ) -> ImportReport:
        """Import a coffer export, Claude Code's memory, CLAUDE.md/AGENTS.md/Cursor rules, an MCP
        ``memory.jsonl`` or a basic-memory folder (idempotent; ``dry_run`` writes nothing).

        ``progress(done, total, entry)`` follows the check and write passes; ``reading(done,
        total)`` the reading of a coffer export before them (``total`` None for JSONL)."""
        return self.porting.import_memory(
            source, kind=kind, store=store, dry_run=dry_run, progress=progress, reading=reading
        )

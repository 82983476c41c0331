"""MemoryService: the facade every face (Python, CLI, REST, MCP) uses.

A facade over components built with explicit collaborators (no mixins):

    Settings -> IndexHandle (SQLite index, retrieval, audit; one lock)
             -> Writer (store/writer.py: the one write transaction) -> Targets (store= | cwd + scope)
    facts, lanes, stores, organizer, transcripts, integrations: each gets what it needs

Today's method names are thin delegations to those components; the components are public too
(``svc.facts``, ``svc.lanes``, ``svc.store_admin``, ``svc.organizer``, ``svc.transcripts``,
``svc.integrations``, ``svc.porting``; see ``docs/concepts.md``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Self

import attrs

from ._checks import content_checks
from ._component import component
from ._config import Settings
from ._core import Facts, WriteEvents
from ._home import check_home
from ._indexing import IndexHandle, Models
from ._models import (
    Actor,
    ClearResult,
    ConsolidationLog,
    DoctorReport,
    FactRecord,
    HandoffScene,
    JournalFile,
    LaneWrite,
    MutationResult,
    Page,
    RecallResult,
    ReindexReport,
    ResolvedScope,
    ResumeResult,
    RulesView,
    StoreInfo,
    Target,
)
from ._optout import OptOut, optout_for, optout_for_roots
from ._store.audit import AuditEvent
from ._store.writer import Writer
from ._targets import PathLike, Targets, resolved_scope
from .vocabulary import MCP_PROBE_TIMEOUT_SECONDS, Scope

if TYPE_CHECKING:  # the components below are imported when first used (``coffer_memory._component``)
    from ._agents.homes import AgentHomes
    from ._agents.install import AgentChange, AgentStatus
    from ._agents.service import Agents
    from ._index.db import IndexDB
    from ._index.reconcile import Reconciler
    from ._index.reindex import Reindexer
    from ._lanes import Lanes
    from ._organize.models import OrganizeReport, ReorgReport
    from ._organize.service import Organizer
    from ._porting import ExportReport, ImportReport, Porting
    from ._porting.apply import Progress as ImportProgress
    from ._porting.models import ExportFormat, ImportKind
    from ._retrieval import KnowledgeRetrieval
    from ._store.paths import StorePaths
    from ._store_config import StoreConfig
    from ._store_merge import StoreMerge
    from ._stores import Stores
    from ._transcripts.ledger import Ledger, LedgerEntry
    from ._transcripts.listing import SessionPage
    from ._transcripts.models import DistillResult, SessionSummary, SweepResult
    from ._transcripts.scrub import ScrubbedTranscript
    from ._transcripts.service import Transcripts
    from .plugins.hookspecs import LLM

__all__ = ["MemoryService", "Scope"]


class MemoryService:
    """Remember, recall, list, edit and delete facts, and keep the lanes beside them.

    ``MemoryService(home=None)`` uses ``$COFFER_HOME``, else ``~/.coffer``; pass
    ``settings=Settings.load(...)`` for more control. Thread-safe; also a context manager.
    """

    def __init__(
        self, home: str | os.PathLike[str] | None = None, *, settings: Settings | None = None
    ) -> None:
        self.settings = settings if settings is not None else Settings.load(home)
        self.home = self.settings.home
        check_home(self.home)
        self._build_lock = threading.RLock()
        self.index = IndexHandle(self.settings)
        self.models = Models(self.settings)
        self.writer = Writer(
            self.home,
            self.settings.memory_dir,
            self.index.lock,
            self.index,
            content_checks(self.settings.security),
        )
        self.targets = Targets(self.settings.memory_dir, self.writer)
        self._events = WriteEvents()
        self.facts = Facts(self.settings, self.index, self.writer, self.targets, self._events)
        if self.settings.organize.auto:  # it listens for new facts from the start
            self.organizer  # noqa: B018

    # -- components built on first use (a keyword recall needs none of them) --------------------
    @component
    def lanes(self) -> Lanes:
        """Journal, handoff, rules, consolidation log and the session-start bundle."""
        from ._lanes import Lanes

        return Lanes(self.settings, self.index, self.writer, self.targets, self.facts)

    @component
    def store_admin(self) -> Stores:
        """Stores: listing, labels, deletion, re-index and doctor."""
        from ._stores import Stores

        return Stores(self.settings, self.index, self.writer, self.targets)

    @component
    def organizer(self) -> Organizer:
        """The LLM organizer: organize, reorganize, auto-organize."""
        from ._organize.service import Organizer
        from ._organize.tools import OrganizeTools

        tools = OrganizeTools(self.settings, self.index, self.writer, self.facts, self.lanes)
        return Organizer(tools, self.models, self._events)

    @component
    def transcripts(self) -> Transcripts:
        """The agents' past sessions: listing, distillation, the ledger."""
        from ._transcripts.service import Transcripts

        return Transcripts(self.settings, self.models, self.writer, self.targets, self.lanes)

    @component
    def integrations(self) -> Agents:
        """Coffer's hooks and MCP entries in each agent's configuration."""
        from ._agents.service import Agents

        return Agents(self.settings, self.index)

    @component
    def porting(self) -> Porting:
        """Export of the truth files and import from coffer exports and other tools' memories."""
        from ._porting import Porting

        return Porting(self.settings, self.writer, self.targets, self.facts, self.store_admin)

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def db(self) -> IndexDB:
        """The index connection, opened (and migrated) on first use."""
        return self.index.db

    @property
    def retrieval(self) -> KnowledgeRetrieval:
        """The recall facade over this home's index."""
        return self.index.retrieval

    @property
    def reindexer(self) -> Reindexer:
        """The single re-index routine of this home."""
        return self.index.reindexer

    @property
    def reconciler(self) -> Reconciler:
        """The reconcile-on-read driver of this home."""
        return self.index.reconciler

    @property
    def llm(self) -> LLM | None:
        """The configured internal model, or None (``[llm] provider = "none"``, the default)."""
        return self.models.llm()

    @property
    def ledger(self) -> Ledger:
        """The ``distilled_sessions`` ledger of this home (``<home>/ledger.db``)."""
        return self.transcripts.ledger

    @property
    def agent_homes(self) -> AgentHomes | None:
        """The agents' directories, when pinned (else they come from the environment at each call)."""
        return self.integrations.agent_homes

    @agent_homes.setter
    def agent_homes(self, homes: AgentHomes | None) -> None:
        self.integrations.agent_homes = homes

    def paths(self, store: str) -> StorePaths:
        """The on-disk paths of a store (validates the name)."""
        return self.targets.paths(store)

    def target(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> Target:
        """Where a call lands: ``store``, else the store ``scope`` maps to from ``cwd`` (resolved once)."""
        return self.targets.resolve(store=store, cwd=cwd, scope=scope)

    def resolve_store(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> str:
        """A store name from an explicit ``store``, or from ``scope`` and ``cwd``."""
        return self.targets.resolve(store=store, cwd=cwd, scope=scope).store

    def resolve_scope(self, cwd: PathLike | None = None, scope: Scope = "project") -> ResolvedScope:
        """The store a scope maps to from ``cwd``, with the project root and this worktree's branch."""
        return resolved_scope(self.targets.resolve(cwd=cwd, scope=scope))

    def recall_stores(self, cwd: PathLike | None = None) -> list[str]:
        """The stores recall searches from ``cwd``: the project's (inside a git repo), then global."""
        return [t.store for t in self.targets.recall(cwd)]

    def writing(self, store: str) -> AbstractContextManager[None]:
        """Hold this service's index lock and the store's inter-process write lock."""
        return self.writer.locked(store)

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
        return self.index.audit_events(store, limit, event=event, since=since, until=until)

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
        return self.index.audit_page(
            store=store, event=event, since=since, until=until, limit=limit, cursor=cursor
        )

    # -- facts ---------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        title: str | None = None,
        description: str | None = None,
        scope: Scope = "project",
        store: str | None = None,
        cwd: PathLike | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
        tags: Iterable[str] = (),
    ) -> MutationResult:
        """Write a new fact (with ``tags``) to ``knowledge/inbox/<slug>.md`` of the store and index it.

        ``origin_session_id`` names the agent session (or chat) the fact comes from: the facts of one
        session, in the order they were remembered, lend each other score in recall, so a reply is
        found through what it answers (docs/concepts.md).
        """
        return self.facts.remember(
            text,
            title=title,
            description=description,
            scope=scope,
            store=store,
            cwd=cwd,
            actor=actor,
            origin_session_id=origin_session_id,
            tags=tags,
        )

    def recall(
        self,
        query: str,
        *,
        cwd: PathLike | None = None,
        stores: Iterable[str] | None = None,
        mode: str | None = None,
        limit: int = 10,
        tags: Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> RecallResult:
        """Search the stores of ``cwd`` (project, then global) or the named ``stores``; only facts
        with every one of ``tags``, updated in ``[since, until)``."""
        return self.facts.recall(
            query, cwd=cwd, stores=stores, mode=mode, limit=limit, tags=tags, since=since, until=until
        )

    def list_facts(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        limit: int = 50,
        cursor: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Page[FactRecord]:
        """Facts of the knowledge lane, newest first, ``limit`` at a time with an opaque cursor;
        ``tags``, ``since`` and ``until`` filter as in ``recall``."""
        return self.facts.list_facts(
            store=store,
            cwd=cwd,
            scope=scope,
            limit=limit,
            cursor=cursor,
            tags=tags,
            since=since,
            until=until,
        )

    def get_fact(
        self, fact_id: str, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> FactRecord:
        """One fact, read from its file, with its path and sha256."""
        return self.facts.get_fact(fact_id, store=store, cwd=cwd, scope=scope)

    def edit_fact(
        self,
        fact_id: str,
        *,
        body: str | None = None,
        title: str | None = None,
        description: str | None = None,
        expected_sha256: str | None = None,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
        tags: Iterable[str] | None = None,
    ) -> MutationResult:
        """Rewrite a fact (compare-and-swap on ``expected_sha256``) and re-index it; ``tags``
        replaces its tags (``None`` keeps them)."""
        return self.facts.edit_fact(
            fact_id,
            body=body,
            title=title,
            description=description,
            expected_sha256=expected_sha256,
            store=store,
            cwd=cwd,
            scope=scope,
            actor=actor,
            tags=tags,
        )

    def delete_fact(
        self,
        fact_id: str,
        *,
        expected_sha256: str | None = None,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> MutationResult:
        """Delete a fact file, then its index rows."""
        return self.facts.delete_fact(
            fact_id, expected_sha256=expected_sha256, store=store, cwd=cwd, scope=scope
        )

    def clear(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> ClearResult:
        """Delete every fact of the knowledge lane (the store and its other lanes stay)."""
        return self.facts.clear(store=store, cwd=cwd, scope=scope)

    # -- lanes ---------------------------------------------------------------------------------
    def journal_append(
        self,
        text: str,
        *,
        cwd: PathLike | None = None,
        store: str | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
        dry_run: bool = False,
    ) -> LaneWrite:
        """Append an entry to today's ``journal/<YYYY-MM-DD>.md`` (UTC) and index that file at once."""
        return self.lanes.journal_append(
            text, cwd=cwd, store=store, actor=actor, origin_session_id=origin_session_id, dry_run=dry_run
        )

    def journal(
        self, *, cwd: PathLike | None = None, store: str | None = None, limit: int = 30
    ) -> list[JournalFile]:
        """The journal's day files, newest period first (at most ``limit``)."""
        return self.lanes.journal(cwd=cwd, store=store, limit=limit)

    def delete_journal(
        self, period: str, *, cwd: PathLike | None = None, store: str | None = None
    ) -> LaneWrite:
        """Delete one day of the journal (and its index rows); logged and audited."""
        return self.lanes.delete_journal(period, cwd=cwd, store=store)

    def save_handoff(self, text: str, *, cwd: PathLike | None = None) -> LaneWrite:
        """Save where work stands on the current branch (one scene per branch; replaces the last)."""
        return self.lanes.save_handoff(text, cwd=cwd)

    def resume(self, *, cwd: PathLike | None = None) -> ResumeResult:
        """The handoff of this project and branch, and whether HEAD has moved since it was written."""
        return self.lanes.resume(cwd=cwd)

    def handoffs(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> list[HandoffScene]:
        """Every branch's handoff scene in a store, newest first."""
        return self.lanes.handoffs(store=store, cwd=cwd, scope=scope)

    def delete_handoff(
        self, branch: str, *, store: str | None = None, cwd: PathLike | None = None
    ) -> LaneWrite:
        """Delete one branch's handoff; logged and audited."""
        return self.lanes.delete_handoff(branch, store=store, cwd=cwd)

    def rules(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> RulesView:
        """Every rules file of the store concatenated (``rules/rules.md`` first)."""
        return self.lanes.rules(store=store, cwd=cwd, scope=scope)

    def append_rule(
        self,
        text: str,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
    ) -> LaneWrite:
        """Append a rule to ``rules/rules.md`` (delivered at session start, never through recall)."""
        return self.lanes.append_rule(text, store=store, cwd=cwd, scope=scope, actor=actor)

    def delete_rules(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> list[LaneWrite]:
        """Delete every rules file of the store; logged and audited."""
        return self.lanes.delete_rules(store=store, cwd=cwd, scope=scope)

    def consolidation_log(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> ConsolidationLog:
        """The organizer's changelog of a store (``text`` is None when there is none)."""
        return self.lanes.consolidation_log(store=store, cwd=cwd, scope=scope)

    def log_change(self, store: str, action: str, detail: str, *, at: datetime | None = None) -> None:
        """Append one line to the store's consolidation log."""
        return self.lanes.log_change(store, action, detail, at=at)

    def delete_consolidation_log(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> LaneWrite:
        """Delete the consolidation log (not logged in itself); audited."""
        return self.lanes.delete_consolidation_log(store=store, cwd=cwd, scope=scope)

    def regenerate_index(self, store: str) -> Path | None:
        """Rewrite ``knowledge/INDEX.md`` from the topic documents (only when it changes)."""
        return self.lanes.regenerate_index(store)

    def archive_version(self, store: str, path: Path, *, replaced_by: str | None) -> Path:
        """Copy a topic document to ``superseded/<slug>-<ts>.md`` before it is overwritten or retired."""
        return self.lanes.archive_version(store, path, replaced_by=replaced_by)

    def assemble_session_context(self, cwd: PathLike | None = None) -> str:
        """The bundle an agent gets at session start (<= 10,000 characters; read-only, no audit)."""
        return self.lanes.assemble_session_context(cwd)

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

    def merge_stores(self, source: str, into: str, *, dry_run: bool = False) -> StoreMerge:
        """Merge project store ``source`` into ``into`` and retire ``source`` (``Stores.merge``)."""
        return self.store_admin.merge(source, into, dry_run=dry_run)

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

    def doctor(self) -> DoctorReport:
        """Compare the index with the files, list broken files and links, say which grep backend
        runs, and start every installed agent's MCP server to see that it answers."""
        from ._doctor import check_agents

        report = self.store_admin.doctor()
        agents = check_agents(self.integrations.agents)
        exclude = self.settings.projects.exclude
        opted_out = tuple(
            f"{s.name} ({o.describe()})"
            for s in report.stores
            if s.project_root and (o := optout_for_roots([Path(s.project_root)], exclude)) is not None
        )
        return attrs.evolve(
            report, agents=agents["agents"], agent_problems=agents["agent_problems"], opted_out=opted_out
        )

    def project_optout(self, cwd: PathLike | None = None) -> OptOut | None:
        """Why the repository holding ``cwd`` (default: the current directory) opted out of coffer's
        automation (session-start bundle, distillation, sweeps), or None when it takes part."""
        return optout_for(cwd if cwd is not None else os.getcwd(), self.settings.projects.exclude)

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
        """Delete every journal entry distilled from ``session_id`` in a project store."""
        return self.transcripts.forget_session(session_id, cwd=cwd, store=store)

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

    def install_agent(self, name: str, *, disable_native_memory: bool | None = None) -> AgentChange:
        """Install coffer's hooks and MCP entry for ``name`` (idempotent; an old path is replaced)."""
        return self.integrations.install_agent(name, disable_native_memory=disable_native_memory)

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
    ) -> ImportReport:
        """Import a coffer export, Claude Code's memory, CLAUDE.md/AGENTS.md/Cursor rules, an MCP
        ``memory.jsonl`` or a basic-memory folder (idempotent; ``dry_run`` writes nothing)."""
        return self.porting.import_memory(source, kind=kind, store=store, dry_run=dry_run, progress=progress)

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Cancel pending auto-organize passes, close the ledger, then the index."""
        organizer = MemoryService.organizer.built(self)
        if organizer is not None:
            organizer.close()
        transcripts = MemoryService.transcripts.built(self)
        if transcripts is not None:
            transcripts.close()
        self.index.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        self.close()

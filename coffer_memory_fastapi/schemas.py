"""Pydantic DTOs of the REST wire contract. They carry disk truth: absolute paths and sha256s."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coffer_memory import (
    AgentChange,
    AgentStatus,
    ConsolidationLog,
    FactRecord,
    HandoffScene,
    JournalEntry,
    JournalFile,
    LaneWrite,
    McpCheck,
    MemoryHit,
    OrganizeReport,
    PlannedChange,
    RecallResult,
    ReindexReport,
    ReorgReport,
    RulesView,
    StoreInfo,
)
from coffer_memory.vocabulary import (
    MAX_DESCRIPTION_CHARS,
    MAX_LABEL_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    Actor,
    DistillStatus,
    RetrievalMode,
    Scope,
)

Mode = RetrievalMode
Tags = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS)]],
    Field(max_length=MAX_TAGS, description="Tags, stored lowercased; no comma or line break."),
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- errors ------------------------------------------------------------------------------------
class ErrorBody(_Out):
    """The inner object of the error envelope."""

    code: str = Field(description="Stable machine code, e.g. MEMORY_STORE_NOT_FOUND or INVALID_INPUT.")
    message: str = Field(description="A readable explanation.")
    details: dict[str, Any] = Field(default_factory=dict, description="Context (store, fact_id, field...).")


class ErrorOut(_Out):
    """The one error envelope of the API: ``{"error": {"code", "message", "details"}}``."""

    error: ErrorBody


# -- stores ------------------------------------------------------------------------------------
class MemoryStoreOut(_Out):
    """A memory store: identity, display name, where it lives on disk, how many facts it holds."""

    name: str = Field(description="'global' or 'project-<26-char ULID>'.")
    scope: Scope
    project_id: str
    display_name: str
    label: str | None
    project_root: str | None
    store_dir: str = Field(description="Absolute path of the store's folder.")
    exists: bool = Field(description="Whether the store's folder exists yet (stores are created lazily).")
    fact_count: int

    @classmethod
    def of(cls, info: StoreInfo) -> MemoryStoreOut:
        """From the core's StoreInfo."""
        return cls(
            name=info.name,
            scope="global" if info.scope.value == "global" else "project",
            project_id=info.project_id,
            display_name=info.display_name,
            label=info.label,
            project_root=info.project_root,
            store_dir=str(info.store_dir),
            exists=info.store_dir.is_dir(),
            fact_count=info.fact_count,
        )


class MemoryStoreListOut(_Out):
    """Every store that exists on disk."""

    items: list[MemoryStoreOut]


class MemoryStoreMetricsOut(_Out):
    """Counts of a store's lanes."""

    name: str
    store_dir: str
    fact_count: int
    journal_files: int
    handoff_scenes: int
    rules_files: int
    consolidation_log: bool = Field(description="Whether consolidation-log.md exists.")


class LabelIn(BaseModel):
    """A store's display label."""

    label: str = Field(min_length=1, max_length=MAX_LABEL_CHARS)


# -- facts -------------------------------------------------------------------------------------
class FactOut(_Out):
    """One fact, as read from its Markdown file."""

    id: str
    store: str
    title: str
    description: str
    text: str = Field(description="The Markdown body: the fact itself.")
    actor: Actor
    origin_session_id: str | None
    created_at: datetime
    updated_at: datetime
    tags: list[str] = Field(default_factory=list, description="The fact's tags (lowercase).")
    path: str = Field(description="Absolute path of the fact's .md file.")
    folder_path: str = Field(description="Absolute path of the folder holding it.")
    sha256: str = Field(description="sha256 of the file's bytes; also the ETag. Send it back as If-Match.")

    @classmethod
    def of(cls, record: FactRecord) -> FactOut:
        """From the core's FactRecord."""
        f = record.fact
        return cls(
            id=f.id,
            store=record.store,
            title=f.title,
            description=f.description,
            text=f.body,
            actor=f.actor,
            origin_session_id=f.origin_session_id,
            created_at=f.created_at,
            updated_at=f.updated_at,
            tags=list(f.tags),
            path=str(record.path),
            folder_path=str(record.folder_path),
            sha256=record.sha256,
        )


class FactMutationOut(_Out):
    """What a write did: the fact after it (before it, for a delete) and the file's sha256s."""

    fact: FactOut
    before_sha256: str | None = Field(description="None for a new fact.")
    after_sha256: str | None = Field(description="None after a delete.")
    created: bool = Field(
        default=True, description="False when the same title and text were already there (nothing written)."
    )
    redacted: dict[str, int] = Field(
        default_factory=dict, description="Secrets replaced by [REDACTED:<kind>] before writing, by kind."
    )
    index_pending: bool = Field(
        default=False, description="The file is durable but not indexed yet; the next read indexes it."
    )


class FactPageOut(_Out):
    """One page of facts, newest first; pass ``next_cursor`` back as ``cursor`` for the next."""

    items: list[FactOut]
    next_cursor: str | None


class FactIn(BaseModel):
    """A new fact."""

    text: str = Field(description="The fact (Markdown). Empty text is rejected with MEMORY_REJECTED.")
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    tags: Tags = Field(default_factory=list)


class FactPatch(BaseModel):
    """Fields to change; omitted fields keep their value (``tags: []`` removes every tag)."""

    text: str | None = None
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    description: str | None = Field(default=None, max_length=MAX_DESCRIPTION_CHARS)
    tags: Tags | None = None


class ClearOut(_Out):
    """What a clear removed from the knowledge lane."""

    store: str
    deleted: int
    paths: list[str]


# -- recall ------------------------------------------------------------------------------------
class MemoryHitOut(_Out):
    """One recall hit; ``score`` is the per-store score of the mode that found it."""

    id: str
    text: str
    score: float
    source: str = Field(description="<scope>:<fact file path>.")
    time: datetime
    store: str
    title: str
    path: str | None

    @classmethod
    def of(cls, hit: MemoryHit) -> MemoryHitOut:
        """From the core's MemoryHit."""
        return cls(
            id=hit.id,
            text=hit.text,
            score=hit.score,
            source=hit.source,
            time=hit.time,
            store=hit.store,
            title=hit.title,
            path=str(hit.path) if hit.path is not None else None,
        )


class RecallOut(_Out):
    """Hits fused across stores (RRF, k=60), the mode that answered and whether it degraded."""

    hits: list[MemoryHitOut]
    mode: Mode
    fallback: bool
    stores: list[str]

    @classmethod
    def of(cls, result: RecallResult) -> RecallOut:
        """From the core's RecallResult."""
        return cls(
            hits=[MemoryHitOut.of(h) for h in result.hits],
            mode=result.mode,
            fallback=result.fallback,
            stores=list(result.stores),
        )


# -- lanes -------------------------------------------------------------------------------------
class RulesOut(_Out):
    """Every rules file of a store, concatenated (rules.md first)."""

    store: str
    text: str
    files: list[str]
    folder_path: str

    @classmethod
    def of(cls, view: RulesView, folder: str) -> RulesOut:
        """From the core's RulesView."""
        return cls(store=view.store, text=view.text, files=[str(p) for p in view.files], folder_path=folder)


class JournalEntryOut(_Out):
    """One entry of a journal day."""

    at: datetime
    actor: str = Field(description="agent or user.")
    origin_session_id: str | None = Field(description="The agent session a distilled entry came from.")
    text: str

    @classmethod
    def of(cls, e: JournalEntry) -> JournalEntryOut:
        """From the core's JournalEntry."""
        return cls(at=e.at, actor=e.actor, origin_session_id=e.origin_session_id, text=e.text)


class JournalFileOut(_Out):
    """One day of the journal: its text, and its entries one by one with their provenance."""

    period: str = Field(description="YYYY-MM-DD.")
    text: str
    path: str
    folder_path: str
    entries: list[JournalEntryOut] = Field(default_factory=list)
    origin_session_ids: list[str] = Field(
        default_factory=list, description="The sessions the day's entries came from, in order."
    )

    @classmethod
    def of(cls, f: JournalFile) -> JournalFileOut:
        """From the core's JournalFile."""
        return cls(
            period=f.period,
            text=f.text,
            path=str(f.path),
            folder_path=str(f.folder_path),
            entries=[JournalEntryOut.of(e) for e in f.entries],
            origin_session_ids=list(f.origin_session_ids),
        )


class JournalOut(_Out):
    """Journal files, newest first; an empty list for a store without a journal."""

    files: list[JournalFileOut]


class HandoffSceneOut(_Out):
    """The handoff of one branch."""

    branch: str
    text: str
    updated_at: datetime
    head: str | None
    path: str
    folder_path: str

    @classmethod
    def of(cls, s: HandoffScene) -> HandoffSceneOut:
        """From the core's HandoffScene."""
        return cls(
            branch=s.branch,
            text=s.text,
            updated_at=s.updated_at,
            head=s.head,
            path=str(s.path),
            folder_path=str(s.folder_path),
        )


class HandoffOut(_Out):
    """One scene per branch, newest first; an empty list when there is none."""

    scenes: list[HandoffSceneOut]


class ConsolidationLogOut(_Out):
    """The organizer's append-only changelog; ``text`` is null when the file does not exist."""

    text: str | None
    path: str
    folder_path: str

    @classmethod
    def of(cls, log: ConsolidationLog) -> ConsolidationLogOut:
        """From the core's ConsolidationLog."""
        return cls(text=log.text, path=str(log.path), folder_path=str(log.folder_path))


class LaneWriteOut(_Out):
    """What a lane delete did: the file and its sha256 before (after is null)."""

    store: str
    path: str
    before_sha256: str | None
    after_sha256: str | None

    @classmethod
    def of(cls, w: LaneWrite) -> LaneWriteOut:
        """From the core's LaneWrite."""
        return cls(
            store=w.store, path=str(w.path), before_sha256=w.before_sha256, after_sha256=w.after_sha256
        )


class LaneDeleteListOut(_Out):
    """Every file a lane delete removed."""

    deleted: list[LaneWriteOut]


# -- agents ------------------------------------------------------------------------------------
class SessionContextOut(_Out):
    """The session-start bundle (at most 10,000 characters)."""

    additional_context: str


class HookReviewOut(_Out):
    """Codex's review state of one of coffer's hooks."""

    event: str
    state: str = Field(description="'trusted', 'untrusted', 'modified' or 'disabled'.")
    message: str = Field(description="What it means and what to do, in words.")


class McpCheckOut(_Out):
    """What starting the registered MCP server and asking it ``initialize`` + ``tools/list`` gave."""

    command: list[str]
    ok: bool
    summary: str = Field(description="One line: the tools it answered with, or what went wrong.")
    tools: list[str]
    seconds: float

    @classmethod
    def of(cls, c: McpCheck) -> McpCheckOut:
        """From the core's McpCheck."""
        return cls(command=list(c.command), ok=c.ok, summary=c.summary(), tools=list(c.tools), seconds=c.seconds)


class AgentOut(_Out):
    """Where coffer's integration with one agent stands, read from the agent's own config files."""

    name: str = Field(description="'claude-code', 'codex' or 'opencode'.")
    label: str = Field(description="Display name, e.g. 'Claude Code'.")
    installed: bool = Field(
        description="Session hooks (where the agent has them) and the MCP entry are in place."
    )
    hooks_supported: bool = Field(description="False for OpenCode: it runs JS plugins, not shell hooks.")
    hooks_installed: bool
    mcp_registered: bool
    native_memory_supported: bool
    disable_native_memory: bool = Field(description="Coffer keeps the agent's own memory switched off.")
    up_to_date: bool = Field(description="Installed, and installing again would change nothing.")
    hook_command: str | None = Field(description="The hook command coffer installs (null without hooks).")
    mcp_command: str = Field(description="The coffer-mcp executable the MCP entry runs.")
    files: list[str] = Field(description="Absolute paths of the config files coffer edits for this agent.")
    notes: list[str] = Field(description="Warnings: a missing script, a broken file, a limitation.")
    home: str | None = Field(default=None, description="The coffer home the installed entries point at.")
    hook_review: list[HookReviewOut] = Field(
        default_factory=list,
        description="Codex only: its review state of coffer's hooks (Codex skips a hook until trusted).",
    )
    mcp_check: McpCheckOut | None = Field(
        default=None, description="The registered MCP server started and asked for its tools (with check_mcp)."
    )
    working: bool = Field(
        default=False, description="Installed, hooks trusted, and (when checked) the MCP server answers."
    )

    @classmethod
    def of(cls, s: AgentStatus) -> AgentOut:
        """From the core's AgentStatus."""
        return cls(
            name=s.name,
            label=s.label,
            installed=s.installed,
            hooks_supported=s.hooks_supported,
            hooks_installed=s.hooks_installed,
            mcp_registered=s.mcp_registered,
            native_memory_supported=s.native_memory_supported,
            disable_native_memory=s.disable_native_memory,
            up_to_date=s.up_to_date,
            hook_command=s.hook_command,
            mcp_command=s.mcp_command,
            files=[str(p) for p in s.files],
            notes=list(s.notes),
            home=str(s.home) if s.home is not None else None,
            hook_review=[HookReviewOut(event=t.event, state=t.state, message=t.describe()) for t in s.hook_review],
            mcp_check=McpCheckOut.of(s.mcp_check) if s.mcp_check is not None else None,
            working=s.working,
        )


class AgentListOut(_Out):
    """Every known agent, installed or not."""

    items: list[AgentOut]


class AgentChangeOut(_Out):
    """What an install, uninstall or native-memory change did, and the agent's status after it."""

    agent: str
    action: Literal["install", "uninstall", "native_memory"]
    changed: list[str] = Field(description="Config files written or removed; empty when nothing changed.")
    status: AgentOut

    @classmethod
    def of(cls, c: AgentChange) -> AgentChangeOut:
        """From the core's AgentChange."""
        return cls(
            agent=c.agent, action=c.action, changed=[str(p) for p in c.changed], status=AgentOut.of(c.status)
        )


class HookInstallIn(BaseModel):
    """Options of a hook install (the body is optional)."""

    model_config = ConfigDict(extra="forbid")

    disable_native_memory: bool | None = Field(
        default=None,
        description="Also switch the agent's own memory off (true) or back (false); null keeps it.",
    )


class AgentPatch(BaseModel):
    """Agent settings to change."""

    model_config = ConfigDict(extra="forbid")

    disable_native_memory: bool = Field(
        description="true switches the agent's own memory off; false restores the user's prior settings."
    )


# -- long-running operations -------------------------------------------------------------------
class ChangeOut(_Out):
    """One change an organize or reorg run made (or would make, on a dry run)."""

    action: str
    source: str | None
    target: str | None
    diff: str
    error: str | None

    @classmethod
    def of(cls, c: PlannedChange) -> ChangeOut:
        """From the core's PlannedChange."""
        return cls(
            action=c.action,
            source=str(c.source) if c.source else None,
            target=str(c.target) if c.target else None,
            diff=c.diff,
            error=c.error,
        )


class OrganizeResultOut(_Out):
    """What organize or reorg did to a store."""

    store: str
    status: Literal["ok", "no_model", "empty"]
    dry_run: bool
    changes: list[ChangeOut]
    steps: int | None = Field(default=None, description="Tool-loop steps (reorg only).")
    summary: str | None = Field(default=None, description="The model's summary (reorg only).")
    prompt_tokens: int
    completion_tokens: int

    @classmethod
    def of(cls, r: OrganizeReport | ReorgReport) -> OrganizeResultOut:
        """From an OrganizeReport or a ReorgReport."""
        reorg = r if isinstance(r, ReorgReport) else None
        return cls(
            store=r.store,
            status=r.status,
            dry_run=r.dry_run,
            changes=[ChangeOut.of(c) for c in r.changes],
            steps=reorg.steps if reorg else None,
            summary=reorg.summary if reorg else None,
            prompt_tokens=r.usage.prompt_tokens,
            completion_tokens=r.usage.completion_tokens,
        )


class ReindexResultOut(_Out):
    """What a reindex pass did to one store."""

    store: str
    scanned: int
    added: int
    updated: int
    removed: int
    unchanged: int
    skipped: list[str]

    @classmethod
    def of(cls, r: ReindexReport) -> ReindexResultOut:
        """From the core's ReindexReport."""
        return cls(
            store=r.store,
            scanned=r.scanned,
            added=r.added,
            updated=r.updated,
            removed=r.removed,
            unchanged=r.unchanged,
            skipped=list(r.skipped),
        )


class InsightOut(_Out):
    """One distilled insight."""

    name: str
    description: str
    body: str


class DistillResultOut(_Out):
    """What distilling one session did (``scrubbed`` counts removals by kind, never values)."""

    agent: str
    session_id: str
    status: DistillStatus
    store: str | None
    insights: list[InsightOut]
    paths: list[str]
    scrubbed: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    detail: str | None

    @classmethod
    def of(cls, r: Any) -> DistillResultOut:
        """From a ``coffer_memory._transcripts.models.DistillResult``."""
        return cls(
            agent=r.agent,
            session_id=r.session_id,
            status=r.status,
            store=r.store,
            insights=[InsightOut(name=i.name, description=i.description, body=i.body) for i in r.insights],
            paths=list(r.paths),
            scrubbed=dict(r.scrubbed),
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            detail=r.detail,
        )


class DistillBatchOut(_Out):
    """The outcome of a session-end distillation (one result) or a sweep (several)."""

    considered: int
    skipped_active: int
    remaining: int
    results: list[DistillResultOut]
    skipped_opted_out: int = Field(default=0, description="Sessions of projects that opted out: never read.")


class OperationOut(_Out):
    """A long-running operation: poll ``GET /api/v1/operations/{id}`` until ``status`` is final."""

    id: str
    kind: Literal["organize", "reorg", "reindex", "distill"]
    store: str
    status: Literal["queued", "running", "succeeded", "failed"]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: OrganizeResultOut | None = Field(description="organize / reorg result once succeeded.")
    reindex: list[ReindexResultOut] | None = Field(description="reindex result once succeeded.")
    distill: DistillBatchOut | None = Field(
        default=None, description="distill / sweep result once succeeded."
    )
    error: ErrorBody | None = Field(description="The error envelope's body once failed.")


class OperationListOut(_Out):
    """Operations of this server process, newest first (the last 100 are kept)."""

    items: list[OperationOut]

"""The REST wire contract. Responses about the core's value objects are ``JsonShape``s (see
``coffer_memory._wire``): each field's type, description and limits come from the core, and a route
answers with ``reply(SHAPE, obj)`` (one serialisation, no second validation) while declaring
``response_model=SHAPE.model`` for the OpenAPI document. To add a route over a core type: declare
its shape here (fields by name, ``"wire=dotted.path"`` for a renamed or nested one, ``JsonExtra`` for
what only this face sends), then ``@router.get(..., response_model=X.model)`` and
``return reply(X, obj)``. Request bodies take their fields' descriptions and limits from the core
with ``json_field``. The hand-written models below describe things the core has no value object for
(errors, operations) or whose value objects do not describe their fields yet (agents, organize,
transcripts).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from coffer_memory import (
    AgentChange,
    AgentStatus,
    ClearResult,
    ConsolidationLog,
    FactRecord,
    HandoffScene,
    JournalEntry,
    JournalFile,
    JsonExtra,
    JsonShape,
    LaneWrite,
    McpCheck,
    MemoryFact,
    MemoryHit,
    MutationResult,
    OrganizeReport,
    Page,
    PlannedChange,
    RecallResult,
    ReindexReport,
    ReorgReport,
    RulesView,
    StoreInfo,
    json_field,
    json_items,
)
from coffer_memory.vocabulary import MAX_SESSION_ID_CHARS, DistillStatus, RetrievalMode

Mode = RetrievalMode
Tags = Annotated[list[Annotated[str, json_items(MemoryFact, "tags")]], json_field(MemoryFact, "tags")]


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
STORE = JsonShape(
    "MemoryStoreOut",
    StoreInfo,
    "A memory store: identity, display name, where it lives on disk, how many facts it holds.",
    (
        "name",
        "scope",
        "project_id",
        "display_name",
        "label",
        "project_root",
        "store_dir",
        "exists",
        "fact_count",
    ),
    extra={"exists": JsonExtra(bool, "Whether the store's folder exists yet (stores are created lazily).")},
)
STORE_LIST = JsonShape.listing("MemoryStoreListOut", "Every store that exists on disk.", "items", STORE)
STORE_METRICS = JsonShape(
    "MemoryStoreMetricsOut",
    StoreInfo,
    "Counts of a store's lanes.",
    (
        "name",
        "store_dir",
        "fact_count",
        "journal_files",
        "handoff_scenes",
        "rules_files",
        "consolidation_log",
    ),
    extra={
        "journal_files": JsonExtra(int, "Days in the journal (0 for the global store)."),
        "handoff_scenes": JsonExtra(int, "Branches with a handoff."),
        "rules_files": JsonExtra(int, "Files in the rules folder."),
        "consolidation_log": JsonExtra(bool, "Whether consolidation-log.md exists."),
    },
)


class LabelIn(BaseModel):
    """A store's display label."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped

    # No ``min_length``: an empty label is the core's own INVALID_INPUT (``set_label``), not pydantic's
    # wording; the schema still says it.
    label: Annotated[str, json_field(StoreInfo, "label", json_schema_extra={"minLength": 1})]


# -- facts -------------------------------------------------------------------------------------
FACT = JsonShape(
    "FactOut",
    FactRecord,
    "One fact, as read from its Markdown file.",
    (
        "id=fact.id",
        "store",
        "title=fact.title",
        "description=fact.description",
        "text=fact.body",
        "actor=fact.actor",
        "origin_session_id=fact.origin_session_id",
        "created_at=fact.created_at",
        "updated_at=fact.updated_at",
        "tags=fact.tags",
        "path",
        "folder_path",
        "sha256",
    ),
)
FACT_MUTATION = JsonShape(
    "FactMutationOut",
    MutationResult,
    "What a write did: the fact after it (before it, for a delete) and the file's sha256s.",
    (
        "fact=record",
        "before_sha256",
        "after_sha256",
        "created",
        "redacted=receipt.findings",
        "index_pending=receipt.index_pending",
    ),
    nested={"fact": FACT},
)
FACT_PAGE = JsonShape(
    "FactPageOut",
    Page,
    "One page of facts, newest first; pass ``next_cursor`` back as ``cursor`` for the next.",
    ("items", "next_cursor"),
    nested={"items": FACT},
)
CLEAR = JsonShape(
    "ClearOut", ClearResult, "What a clear removed from the knowledge lane.", ("store", "deleted", "paths")
)


class FactIn(BaseModel):
    """A new fact."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped

    text: Annotated[str, json_field(MemoryFact, "body")]
    title: Annotated[str | None, json_field(MemoryFact, "title", default=None)]
    description: Annotated[str | None, json_field(MemoryFact, "description", default=None)]
    tags: Tags = Field(default_factory=list)
    origin_session_id: Annotated[
        str | None,
        Field(
            default=None,
            max_length=MAX_SESSION_ID_CHARS,
            description="The agent session or chat the fact comes from: facts of one session are "
            "recalled with their neighbours.",
        ),
    ]


class FactPatch(BaseModel):
    """Fields to change; omitted fields keep their value (``tags: []`` removes every tag)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is refused, not dropped

    text: Annotated[str | None, json_field(MemoryFact, "body", default=None)]
    title: Annotated[str | None, json_field(MemoryFact, "title", default=None)]
    description: Annotated[str | None, json_field(MemoryFact, "description", default=None)]
    tags: Tags | None = None


# -- recall ------------------------------------------------------------------------------------
HIT = JsonShape(
    "MemoryHitOut",
    MemoryHit,
    "One recall hit; ``score`` is the per-store score of the mode that found it.",
    ("id", "text", "score", "source", "time", "store", "title", "path"),
)
RECALL = JsonShape(
    "RecallOut",
    RecallResult,
    "Hits fused across stores (RRF, k=60), the mode that answered and whether it degraded.",
    ("hits", "mode", "fallback", "stores"),
    nested={"hits": HIT},
)

# -- lanes -------------------------------------------------------------------------------------
RULES = JsonShape(
    "RulesOut",
    RulesView,
    "Every rules file of a store, concatenated (rules.md first).",
    ("store", "text", "files", "folder_path=folder"),
)
JOURNAL_ENTRY = JsonShape(
    "JournalEntryOut",
    JournalEntry,
    "One entry of a journal day.",
    ("at", "actor", "origin_session_id", "text"),
)
JOURNAL_FILE = JsonShape(
    "JournalFileOut",
    JournalFile,
    "One day of the journal: its text, and its entries one by one with their provenance.",
    ("period", "text", "path", "folder_path", "entries", "origin_session_ids"),
    nested={"entries": JOURNAL_ENTRY},
)
JOURNAL = JsonShape.listing(
    "JournalOut",
    "Journal files, newest first; an empty list for a store without a journal.",
    "files",
    JOURNAL_FILE,
)
SCENE = JsonShape(
    "HandoffSceneOut",
    HandoffScene,
    "The handoff of one branch.",
    ("branch", "text", "updated_at", "head", "path", "folder_path", "saved_as", "renamed_to"),
)
HANDOFF = JsonShape.listing(
    "HandoffOut", "One scene per branch, newest first; an empty list when there is none.", "scenes", SCENE
)
CONSOLIDATION_LOG = JsonShape(
    "ConsolidationLogOut",
    ConsolidationLog,
    "The organizer's append-only changelog; ``text`` is null when the file does not exist.",
    ("text", "path", "folder_path"),
)
LANE_WRITE = JsonShape(
    "LaneWriteOut",
    LaneWrite,
    "What a lane delete did: the file and its sha256 before (after is null).",
    ("store", "path", "before_sha256", "after_sha256"),
)
LANE_DELETES = JsonShape.listing(
    "LaneDeleteListOut", "Every file a lane delete removed.", "deleted", LANE_WRITE
)
REINDEX = JsonShape(
    "ReindexResultOut",
    ReindexReport,
    "What a reindex pass did to one store.",
    ("store", "scanned", "added", "updated", "removed", "unchanged", "skipped"),
)
if TYPE_CHECKING:
    ReindexResultOut = BaseModel
else:
    ReindexResultOut = REINDEX.model


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
        return cls(
            command=list(c.command), ok=c.ok, summary=c.summary(), tools=list(c.tools), seconds=c.seconds
        )


class AgentOut(_Out):
    """Where coffer's integration with one agent stands, read from the agent's own config files."""

    name: str = Field(description="'claude-code', 'codex' or 'opencode'.")
    label: str = Field(description="Display name, e.g. 'Claude Code'.")
    installed: bool = Field(
        description="Session hooks (where the agent has them) and the MCP entry are in place "
        "(the hooks alone when installed with hooks_only)."
    )
    hooks_supported: bool = Field(description="False for OpenCode: it runs JS plugins, not shell hooks.")
    hooks_installed: bool
    mcp_registered: bool
    native_memory_supported: bool
    disable_native_memory: bool = Field(description="Coffer keeps the agent's own memory switched off.")
    up_to_date: bool = Field(description="Installed, and installing again would change nothing.")
    hook_command: str | None = Field(
        description="The hook command installed in the agent's files (null when coffer's hooks are not)."
    )
    mcp_command: str | None = Field(
        description="The command coffer's registered MCP entry runs (null when there is none: hooks_only)."
    )
    files: list[str] = Field(description="Absolute paths of the config files coffer edits for this agent.")
    notes: list[str] = Field(description="Warnings: a missing script, a broken file, a limitation.")
    home: str | None = Field(default=None, description="The coffer home the installed entries point at.")
    hook_review: list[HookReviewOut] = Field(
        default_factory=list,
        description="Codex only: its review state of coffer's hooks (Codex skips a hook until trusted).",
    )
    mcp_check: McpCheckOut | None = Field(
        default=None,
        description="The registered MCP server started and asked for its tools (with check_mcp).",
    )
    working: bool = Field(
        default=False, description="Installed, hooks trusted, and (when checked) the MCP server answers."
    )
    hooks_only: bool = Field(
        default=False, description="Installed with the session hooks alone, on purpose: no MCP entry."
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
            hook_review=[
                HookReviewOut(event=t.event, state=t.state, message=t.describe()) for t in s.hook_review
            ],
            mcp_check=McpCheckOut.of(s.mcp_check) if s.mcp_check is not None else None,
            hooks_only=s.hooks_only,
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
    notes: list[str] = Field(
        default_factory=list,
        description="What the change did beyond the files: an entry of the user's replaced (force), "
        "a .bak kept.",
    )
    kept_backups: list[str] = Field(
        default_factory=list,
        description="Uninstall: .bak files kept because they differ from the restored file.",
    )
    removed_folders: list[str] = Field(
        default_factory=list, description="Uninstall: folders coffer had made, removed because empty."
    )

    @classmethod
    def of(cls, c: AgentChange) -> AgentChangeOut:
        """From the core's AgentChange."""
        return cls(
            agent=c.agent,
            action=c.action,
            changed=[str(p) for p in c.changed],
            status=AgentOut.of(c.status),
            notes=list(c.notes),
            kept_backups=[str(p) for p in c.kept_backups],
            removed_folders=[str(p) for p in c.removed_folders],
        )


class HookInstallIn(BaseModel):
    """Options of a hook install (the body is optional)."""

    model_config = ConfigDict(extra="forbid")

    disable_native_memory: bool | None = Field(
        default=None,
        description="Also switch the agent's own memory off (true) or back (false); null keeps it.",
    )
    hooks_only: bool = Field(
        default=False,
        description="Install the session hooks alone, without the MCP server (which needs the [mcp] extra).",
    )
    force: bool = Field(
        default=False,
        description="Replace a 'coffer' MCP entry of the user's own (refused with 409 otherwise); "
        "uninstall puts it back.",
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

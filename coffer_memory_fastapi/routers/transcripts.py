"""Agent sessions: list past transcripts, the scrubbed view, session-end distillation, sweeps."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import attrs
from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from coffer_memory import MemoryService
from coffer_memory.vocabulary import (
    DEFAULT_LIST_LIMIT,
    MAX_PATH_CHARS,
    MAX_SEARCH_CHARS,
    MAX_SESSION_ID_CHARS,
    MAX_SWEEP_LIMIT,
    MAX_TRANSCRIPT_LIST_LIMIT,
    require_agent,
)

from ..deps import Ops, Service, check_cwd
from ..errors import error_responses
from ..schemas import DistillBatchOut, DistillResultOut, OperationOut
from .operations import _STARTED, _accepted

router = APIRouter(prefix="/api/v1/agents", tags=["transcripts"])
AgentName = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="The agent.")]
SessionId = Annotated[
    str, Path(min_length=1, max_length=MAX_SESSION_ID_CHARS, description="The agent's session id.")
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TranscriptOut(_Model):
    """One past session (a read-only projection of the agent's own files)."""

    agent: str
    session_id: str
    title: str | None
    project_path: str | None
    message_count: int
    started_at: datetime | None
    last_activity_at: datetime | None
    source_path: str

    @classmethod
    def of(cls, s: Any) -> TranscriptOut:
        """From a ``SessionSummary`` (same fields)."""
        return cls(**attrs.asdict(s, recurse=False))


class TranscriptPageOut(_Model):
    """A page of sessions and how many match in all."""

    items: list[TranscriptOut]
    total: int
    limit: int
    offset: int


class TurnOut(_Model):
    """One scrubbed turn."""

    role: Literal["user", "assistant"]
    text: str
    timestamp: datetime | None


class ScrubbedTranscriptOut(_Model):
    """A session as distillation sends it to the model, and what was removed (counts only)."""

    session: TranscriptOut
    messages: list[TurnOut]
    scrubbed: dict[str, int]


class SessionEndIn(_Model):
    """The SessionEnd hook's body."""

    cwd: str = Field(description="The session's absolute working directory.")
    transcript_path: str | None = Field(default=None, description="Accepted for the hook's sake; unused.")


@router.get("/{name}/transcripts", response_model=TranscriptPageOut, responses=error_responses())
def list_transcripts(
    svc: Service,
    name: AgentName,
    search: Annotated[
        str | None, Query(max_length=MAX_SEARCH_CHARS, description="Substring of title or project path.")
    ] = None,
    project: Annotated[
        str | None, Query(max_length=MAX_PATH_CHARS, description="Exact project path.")
    ] = None,
    started_after: datetime | None = None,
    started_before: datetime | None = None,
    sort: Literal["started_at", "last_activity_at", "message_count"] = "last_activity_at",
    order: Literal["asc", "desc"] = "desc",
    limit: Annotated[int, Query(ge=1, le=MAX_TRANSCRIPT_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> TranscriptPageOut:
    """Past sessions of the agent: search, filter, sort and paginate on the server."""
    page = svc.list_transcripts(
        name,
        search=search,
        project=project,
        started_after=started_after,
        started_before=started_before,
        sort=sort,
        order=order,
        limit=limit,
        offset=offset,
    )
    return TranscriptPageOut(
        items=[TranscriptOut.of(s) for s in page.items], total=page.total, limit=limit, offset=offset
    )


@router.get(
    "/{name}/transcripts/{session_id}", response_model=ScrubbedTranscriptOut, responses=error_responses(404)
)
def show_transcript(svc: Service, name: AgentName, session_id: SessionId) -> ScrubbedTranscriptOut:
    """The scrubbed view of one session: prose only, outputs dropped, secrets redacted."""
    view = svc.show_transcript(name, session_id)
    return ScrubbedTranscriptOut(
        session=TranscriptOut.of(view.summary),
        messages=[TurnOut(role=m.role, text=m.text, timestamp=m.timestamp) for m in view.messages],
        scrubbed=dict(view.report.counts),
    )


def _store_of(svc: MemoryService, cwd: str) -> str:
    return next((t.store for t in svc.targets.find_project(cwd)), "")


@router.post(
    "/{name}/sessions/{session_id}/end",
    status_code=202,
    response_model=OperationOut,
    responses={**error_responses(), **_STARTED},
)
def end_session(
    svc: Service, ops: Ops, response: Response, name: AgentName, session_id: SessionId, body: SessionEndIn
) -> OperationOut:
    """Distill the session that just ended, in the background (idempotent through the ledger).

    A no-op (reported in the operation's result) when no model is configured, the directory
    is not in a git project, or this content was already distilled.
    """
    cwd = check_cwd(body.cwd)
    require_agent(name)

    def work() -> DistillBatchOut:
        result = DistillResultOut.of(svc.end_session(name, session_id, cwd=cwd))
        return DistillBatchOut(considered=1, skipped_active=0, remaining=0, results=[result])

    return _accepted(ops.start("distill", _store_of(svc, cwd), work), response)


class LeftPickUpIn(_Model):
    """The SessionStart hook's body when it asks the server to pick up left sessions."""

    going_on: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SESSION_ID_CHARS,
        description="The session starting: not picked up (it goes on, and its own end distils it).",
    )


_NOTHING_LEFT: dict[int | str, dict[str, Any]] = {204: {"description": "Nothing left to pick up."}}


@router.post(
    "/{name}/sessions/left/pick-up",
    status_code=202,
    response_model=OperationOut,
    responses={**error_responses(), **_STARTED, **_NOTHING_LEFT},
)
def pick_up_left(
    svc: Service, ops: Ops, response: Response, name: AgentName, body: LeftPickUpIn
) -> OperationOut | Response:
    """Distil, in the background, up to 5 sessions of the agent whose earlier end was left
    ``in_progress`` (their family still being distilled then): what coffer-hook's session start
    does with ``COFFER_API_URL`` set, in the server's home. ``204`` and no operation when none is
    left or no model is configured (as a start without the server: its only cost is a look at the
    agent's left mark, no ledger read)."""
    require_agent(name)
    if svc.llm is None or not svc.transcripts.has_left(name):
        return Response(status_code=204)

    def work() -> DistillBatchOut:
        results = [DistillResultOut.of(r) for r in svc.transcripts.pick_up_left(name, body.going_on)]
        return DistillBatchOut(considered=len(results), skipped_active=0, remaining=0, results=results)

    return _accepted(ops.start("distill", "", work), response)


@router.post(
    "/{name}/transcripts/sweep",
    status_code=202,
    response_model=OperationOut,
    responses={**error_responses(), **_STARTED},
)
def sweep(
    svc: Service,
    ops: Ops,
    response: Response,
    name: AgentName,
    limit: Annotated[int, Query(ge=1, le=MAX_SWEEP_LIMIT)] = 20,
    min_idle_seconds: Annotated[int, Query(ge=0)] = 600,
    dry_run: Annotated[bool, Query(description="Ask the model, write nothing.")] = False,
) -> OperationOut:
    """Distill the agent's sessions not yet in the ledger (at most ``limit`` per run)."""
    require_agent(name)

    def work() -> DistillBatchOut:
        r = svc.sweep(name, limit=limit, min_idle_seconds=min_idle_seconds, dry_run=dry_run)
        return DistillBatchOut(
            considered=r.considered,
            skipped_active=r.skipped_active,
            remaining=r.remaining,
            results=[DistillResultOut.of(x) for x in r.results],
            skipped_opted_out=r.skipped_opted_out,
        )

    return _accepted(ops.start("distill", "", work), response)

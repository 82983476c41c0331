"""The audit log: what coffer (and edits outside it) changed, newest first."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from coffer_memory import AuditEvent
from coffer_memory.vocabulary import MAX_AUDIT_FILTER_CHARS, MAX_AUDIT_LIMIT, MAX_CURSOR_CHARS, WHEN_FORMS

from ..deps import AsyncService
from ..errors import error_responses

router = APIRouter(prefix="/api/v1/audit", tags=["audit"])
_WHEN = WHEN_FORMS


class AuditEventOut(BaseModel):
    """One audit event (``details`` never holds a memory's text)."""

    model_config = ConfigDict(extra="forbid")

    at: datetime
    event: str = Field(description="e.g. memory_added, memory_updated, memory_deleted, store_deleted.")
    store: str | None = Field(description="The store it concerns; null for agent events.")
    document_id: str | None
    actor: str | None = Field(description="agent, user or external (an edit made outside coffer).")
    details: dict[str, Any]

    @classmethod
    def of(cls, e: AuditEvent) -> AuditEventOut:
        """From the core's AuditEvent."""
        return cls(
            at=e.at,
            event=e.event,
            store=e.store,
            document_id=e.document_id,
            actor=e.actor,
            details=dict(e.details),
        )


class AuditPageOut(BaseModel):
    """One page of the audit log, newest first; pass ``next_cursor`` back as ``cursor`` for the next."""

    model_config = ConfigDict(extra="forbid")

    items: list[AuditEventOut]
    next_cursor: str | None


@router.get("", response_model=AuditPageOut, responses=error_responses(404))
async def list_audit(
    svc: AsyncService,
    store: Annotated[
        str | None, Query(max_length=MAX_AUDIT_FILTER_CHARS, description="Only events of this store.")
    ] = None,
    event: Annotated[
        str | None, Query(max_length=MAX_AUDIT_FILTER_CHARS, description="Only this event.")
    ] = None,
    since: Annotated[
        str | None, Query(max_length=MAX_AUDIT_FILTER_CHARS, description="At or after: " + _WHEN)
    ] = None,
    until: Annotated[
        str | None, Query(max_length=MAX_AUDIT_FILTER_CHARS, description="Before: " + _WHEN)
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_AUDIT_LIMIT)] = 100,
    cursor: Annotated[
        str | None, Query(max_length=MAX_CURSOR_CHARS, description="next_cursor of the last page.")
    ] = None,
) -> AuditPageOut:
    """Audit events newest first. A malformed store name is 404 MEMORY_STORE_NOT_FOUND; events of a
    deleted store stay readable."""
    page = await svc.audit(store=store, event=event, since=since, until=until, limit=limit, cursor=cursor)
    return AuditPageOut(items=[AuditEventOut.of(e) for e in page.items], next_cursor=page.next_cursor)

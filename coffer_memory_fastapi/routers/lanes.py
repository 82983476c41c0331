"""The lanes beside the facts: rules, journal, handoff, consolidation log (reads and deletes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from coffer_memory import MemoryScope
from coffer_memory.vocabulary import MAX_JOURNAL_DAYS

from ..deps import AsyncService, clean
from ..errors import error_responses
from ..schemas import (
    ConsolidationLogOut,
    HandoffOut,
    HandoffSceneOut,
    JournalFileOut,
    JournalOut,
    LaneDeleteListOut,
    LaneWriteOut,
    RulesOut,
)

router = APIRouter(prefix="/api/v1/memory_stores/{name}", tags=["lanes"])


@router.get("/rules", response_model=RulesOut, responses=error_responses(404))
async def get_rules(name: str, svc: AsyncService) -> RulesOut:
    """Every rules file of the store, concatenated (``text`` is empty when there are none)."""
    view = await svc.rules(store=name)
    return RulesOut.of(view, str(view.folder))


@router.delete("/rules", response_model=LaneDeleteListOut, responses=error_responses(404))
async def delete_rules(name: str, svc: AsyncService) -> LaneDeleteListOut:
    """Delete every rules file; 404 MEMORY_NOT_FOUND when there is none."""
    return LaneDeleteListOut(deleted=[LaneWriteOut.of(w) for w in await svc.delete_rules(store=name)])


@router.get("/journal", response_model=JournalOut, responses=error_responses(404))
async def get_journal(
    name: str, svc: AsyncService, limit: Annotated[int, Query(ge=1, le=MAX_JOURNAL_DAYS)] = 30
) -> JournalOut:
    """Journal day files, newest first (the global store has no journal: an empty list)."""
    if (await svc.target(store=name)).scope is MemoryScope.GLOBAL:
        return JournalOut(files=[])
    return JournalOut(files=[JournalFileOut.of(f) for f in await svc.journal(store=name, limit=limit)])


@router.delete("/journal/{period}", response_model=LaneWriteOut, responses=error_responses(404))
async def delete_journal(name: str, period: str, svc: AsyncService) -> LaneWriteOut:
    """Delete one day (``YYYY-MM-DD``) of the journal and its index rows."""
    return LaneWriteOut.of(await svc.delete_journal(clean(period, "period") or "", store=name))


@router.get("/handoff", response_model=HandoffOut, responses=error_responses(404))
async def get_handoff(name: str, svc: AsyncService) -> HandoffOut:
    """Every branch's handoff scene, newest first."""
    return HandoffOut(scenes=[HandoffSceneOut.of(s) for s in await svc.handoffs(store=name)])


@router.delete("/handoff/{branch:path}", response_model=LaneWriteOut, responses=error_responses(404))
async def delete_handoff(name: str, branch: str, svc: AsyncService) -> LaneWriteOut:
    """Delete one branch's handoff (branch names may contain ``/``)."""
    return LaneWriteOut.of(await svc.delete_handoff(clean(branch, "branch") or "", store=name))


@router.get("/consolidation-log", response_model=ConsolidationLogOut, responses=error_responses(404))
async def get_consolidation_log(name: str, svc: AsyncService) -> ConsolidationLogOut:
    """The organizer's changelog; ``text`` is null when there is none."""
    return ConsolidationLogOut.of(await svc.consolidation_log(store=name))


@router.delete("/consolidation-log", response_model=LaneWriteOut, responses=error_responses(404))
async def delete_consolidation_log(name: str, svc: AsyncService) -> LaneWriteOut:
    """Delete the consolidation log."""
    return LaneWriteOut.of(await svc.delete_consolidation_log(store=name))

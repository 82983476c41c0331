"""The lanes beside the facts: rules, journal, handoff, consolidation log (reads and deletes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from coffer_memory import MemoryScope
from coffer_memory.vocabulary import MAX_JOURNAL_DAYS

from ..deps import Service, clean
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
def get_rules(name: str, svc: Service) -> RulesOut:
    """Every rules file of the store, concatenated (``text`` is empty when there are none)."""
    view = svc.rules(store=name)
    return RulesOut.of(view, str(view.folder))


@router.delete("/rules", response_model=LaneDeleteListOut, responses=error_responses(404))
def delete_rules(name: str, svc: Service) -> LaneDeleteListOut:
    """Delete every rules file; 404 MEMORY_NOT_FOUND when there is none."""
    return LaneDeleteListOut(deleted=[LaneWriteOut.of(w) for w in svc.delete_rules(store=name)])


@router.get("/journal", response_model=JournalOut, responses=error_responses(404))
def get_journal(
    name: str, svc: Service, limit: Annotated[int, Query(ge=1, le=MAX_JOURNAL_DAYS)] = 30
) -> JournalOut:
    """Journal day files, newest first (the global store has no journal: an empty list)."""
    if svc.target(store=name).scope is MemoryScope.GLOBAL:
        return JournalOut(files=[])
    return JournalOut(files=[JournalFileOut.of(f) for f in svc.journal(store=name, limit=limit)])


@router.delete("/journal/{period}", response_model=LaneWriteOut, responses=error_responses(404))
def delete_journal(name: str, period: str, svc: Service) -> LaneWriteOut:
    """Delete one day (``YYYY-MM-DD``) of the journal and its index rows."""
    return LaneWriteOut.of(svc.delete_journal(clean(period, "period") or "", store=name))


@router.get("/handoff", response_model=HandoffOut, responses=error_responses(404))
def get_handoff(name: str, svc: Service) -> HandoffOut:
    """Every branch's handoff scene, newest first."""
    return HandoffOut(scenes=[HandoffSceneOut.of(s) for s in svc.handoffs(store=name)])


@router.delete("/handoff/{branch:path}", response_model=LaneWriteOut, responses=error_responses(404))
def delete_handoff(name: str, branch: str, svc: Service) -> LaneWriteOut:
    """Delete one branch's handoff (branch names may contain ``/``)."""
    return LaneWriteOut.of(svc.delete_handoff(clean(branch, "branch") or "", store=name))


@router.get("/consolidation-log", response_model=ConsolidationLogOut, responses=error_responses(404))
def get_consolidation_log(name: str, svc: Service) -> ConsolidationLogOut:
    """The organizer's changelog; ``text`` is null when there is none."""
    return ConsolidationLogOut.of(svc.consolidation_log(store=name))


@router.delete("/consolidation-log", response_model=LaneWriteOut, responses=error_responses(404))
def delete_consolidation_log(name: str, svc: Service) -> LaneWriteOut:
    """Delete the consolidation log."""
    return LaneWriteOut.of(svc.delete_consolidation_log(store=name))

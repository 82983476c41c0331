"""The lanes beside the facts: rules, journal, handoff, consolidation log (reads and deletes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from coffer_memory.vocabulary import MAX_JOURNAL_DAYS

from ..deps import AsyncService, clean
from ..errors import error_responses
from ..reply import reply
from ..schemas import (
    CONSOLIDATION_LOG,
    HANDOFF,
    JOURNAL,
    JOURNAL_FILE,
    LANE_DELETES,
    LANE_WRITE,
    RULES,
    SCENE,
)

router = APIRouter(prefix="/api/v1/memory_stores/{name}", tags=["lanes"])


@router.get("/rules", response_model=RULES.model, responses=error_responses(404))
async def get_rules(name: str, svc: AsyncService) -> Response:
    """Every rules file of the store, concatenated (``text`` is empty when there are none)."""
    return reply(RULES, await svc.rules(store=name))


@router.delete("/rules", response_model=LANE_DELETES.model, responses=error_responses(404))
async def delete_rules(name: str, svc: AsyncService) -> Response:
    """Delete every rules file; 404 MEMORY_NOT_FOUND when there is none."""
    deleted = [LANE_WRITE.dump(w) for w in await svc.delete_rules(store=name)]
    return reply(LANE_DELETES, None, deleted=deleted)


@router.get("/journal", response_model=JOURNAL.model, responses=error_responses(404))
async def get_journal(
    name: str, svc: AsyncService, limit: Annotated[int, Query(ge=1, le=MAX_JOURNAL_DAYS)] = 30
) -> Response:
    """Journal day files, newest first. The global store has no journal: 422 INVALID_INPUT (field
    ``store``), as in Python and the CLI, never an empty list that reads as "nothing happened"."""
    files = [JOURNAL_FILE.dump(f) for f in await svc.journal(store=name, limit=limit)]
    return reply(JOURNAL, None, files=files)


@router.delete("/journal/{period}", response_model=LANE_WRITE.model, responses=error_responses(404))
async def delete_journal(name: str, period: str, svc: AsyncService) -> Response:
    """Delete one day (``YYYY-MM-DD``) of the journal and its index rows."""
    return reply(LANE_WRITE, await svc.delete_journal(clean(period, "period") or "", store=name))


@router.get("/handoff", response_model=HANDOFF.model, responses=error_responses(404))
async def get_handoff(name: str, svc: AsyncService) -> Response:
    """Every branch's handoff scene, newest first."""
    return reply(HANDOFF, None, scenes=[SCENE.dump(s) for s in await svc.handoffs(store=name)])


@router.delete("/handoff/{branch:path}", response_model=LANE_WRITE.model, responses=error_responses(404))
async def delete_handoff(name: str, branch: str, svc: AsyncService) -> Response:
    """Delete one branch's handoff (branch names may contain ``/``)."""
    return reply(LANE_WRITE, await svc.delete_handoff(clean(branch, "branch") or "", store=name))


@router.get("/consolidation-log", response_model=CONSOLIDATION_LOG.model, responses=error_responses(404))
async def get_consolidation_log(name: str, svc: AsyncService) -> Response:
    """The organizer's changelog; ``text`` is null when there is none."""
    return reply(CONSOLIDATION_LOG, await svc.consolidation_log(store=name))


@router.delete("/consolidation-log", response_model=LANE_WRITE.model, responses=error_responses(404))
async def delete_consolidation_log(name: str, svc: AsyncService) -> Response:
    """Delete the consolidation log."""
    return reply(LANE_WRITE, await svc.delete_consolidation_log(store=name))

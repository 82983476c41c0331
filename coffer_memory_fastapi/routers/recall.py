"""Recall across the scopes of a working directory, over named stores, or in one store."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from coffer_memory import InvalidInput
from coffer_memory.vocabulary import MAX_QUERY_CHARS, MAX_RECALL_LIMIT

from ..deps import AsyncService, check_cwd, clean
from ..errors import error_responses
from ..schemas import Mode, RecallOut

router = APIRouter(prefix="/api/v1/memory_stores", tags=["recall"])

QueryText = Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")]
ModeParam = Annotated[Mode | None, Query(description="Retrieval mode; the configured default when omitted.")]
Limit = Annotated[int, Query(ge=1, le=MAX_RECALL_LIMIT)]


@router.get("/recall", response_model=RecallOut, responses=error_responses(404))
async def recall(
    svc: AsyncService,
    query: QueryText,
    cwd: Annotated[
        str | None, Query(description="Absolute working directory: its project store, then global.")
    ] = None,
    store: Annotated[list[str] | None, Query(description="Store names to search instead of cwd's.")] = None,
    mode: ModeParam = None,
    limit: Limit = 10,
) -> RecallOut:
    """Search the stores of ``cwd`` (its project, then global) or the named stores; fused by RRF."""
    if (cwd is None) == (not store):
        raise InvalidInput("pass either cwd or one or more store names", field="cwd")
    clean(query, "query")
    if cwd is not None:
        return RecallOut.of(await svc.recall(query, cwd=check_cwd(cwd), mode=mode, limit=limit))
    return RecallOut.of(await svc.recall(query, stores=store, mode=mode, limit=limit))


@router.get("/{name}/recall", response_model=RecallOut, responses=error_responses(404))
async def recall_store(
    name: str, svc: AsyncService, query: QueryText, mode: ModeParam = None, limit: Limit = 10
) -> RecallOut:
    """Search one store."""
    clean(query, "query")
    return RecallOut.of(await svc.recall(query, stores=[name], mode=mode, limit=limit))

"""Recall across the scopes of a working directory, over named stores, or in one store."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from coffer_memory import AsyncMemoryService, InvalidInput, RecallResult
from coffer_memory.vocabulary import MAX_QUERY_CHARS, MAX_RECALL_LIMIT, MAX_TAG_CHARS, MAX_TAGS, WHEN_FORMS

from ..deps import AsyncService, check_cwd, clean
from ..errors import error_responses
from ..reply import reply
from ..schemas import RECALL, Mode

router = APIRouter(prefix="/api/v1/memory_stores", tags=["recall"])

# No ``min_length`` or ``max_length``: an empty or over-long query is the core's ``INVALID_INPUT``
# (``query is empty``, ``query is longer than 4096 characters``; field ``query``), as from the CLI,
# MCP and Python, not pydantic's wording; the schema still says both bounds. The core checks the
# length before it reads the text any further.
QueryText = Annotated[
    str,
    Query(description="What to look for.", json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS}),
]
ModeParam = Annotated[Mode | None, Query(description="Retrieval mode; the configured default when omitted.")]
Limit = Annotated[int, Query(ge=1, le=MAX_RECALL_LIMIT)]
TagFilter = Annotated[
    list[Annotated[str, Query(max_length=MAX_TAG_CHARS)]] | None,
    Query(max_length=MAX_TAGS, description="Only facts with this tag (repeatable: all must match)."),
]
# Times arrive as text and the core reads them (``check_time``), as from the CLI, MCP and Python:
# pydantic's datetime took Unix timestamps and refused "2026-01-01T10" that the others read.
TIME_CHARS = 64
Since = Annotated[
    str | None,
    Query(
        max_length=TIME_CHARS,
        description=f"Only facts updated at or after this time: {WHEN_FORMS}.",
    ),
]
Until = Annotated[
    str | None,
    Query(
        max_length=TIME_CHARS,
        description=f"Only facts updated before this time: {WHEN_FORMS}.",
    ),
]


@router.get("/recall", response_model=RECALL.model, responses=error_responses(404))
async def recall(
    svc: AsyncService,
    query: QueryText,
    cwd: Annotated[
        str | None, Query(description="Absolute working directory: its project store, then global.")
    ] = None,
    store: Annotated[list[str] | None, Query(description="Store names to search instead of cwd's.")] = None,
    mode: ModeParam = None,
    limit: Limit = 10,
    tag: TagFilter = None,
    since: Since = None,
    until: Until = None,
) -> Response:
    """Search the stores of ``cwd`` (its project, then global) or the named stores; fused by RRF."""
    return await answer(svc, query, cwd, store, mode, limit, tag, since, until)


@router.get("/{name}/recall", response_model=RECALL.model, responses=error_responses(404))
async def recall_store(
    name: str,
    svc: AsyncService,
    query: QueryText,
    mode: ModeParam = None,
    limit: Limit = 10,
    tag: TagFilter = None,
    since: Since = None,
    until: Until = None,
) -> Response:
    """Search one store."""
    return await answer(svc, query, None, None, mode, limit, tag, since, until, name=name)


async def answer(svc: AsyncMemoryService, *params: Any, name: str | None = None) -> Response:
    """Both routes' answer to their validated parameters (``found``'s, ``name``: the one store of
    the path)."""
    return reply(RECALL, await found(svc, *params, name=name))


async def found(
    svc: AsyncMemoryService,
    query: str,
    cwd: str | None,
    store: list[str] | None,
    mode: Mode | None,
    limit: int,
    tag: list[str] | None,
    since: str | None,
    until: str | None,
    *,
    name: str | None = None,
) -> RecallResult:
    """What ``answer`` answers, before its encoding (``RecallShortcut`` encodes it itself)."""
    if name is None and (cwd is None) == (not store):
        raise InvalidInput("pass either cwd or one or more store names", field="cwd")
    clean(query, "query")
    where = check_cwd(cwd) if cwd is not None else None
    stores = [name] if name is not None else store or None
    return await svc.recall(
        query, cwd=where, stores=stores, mode=mode, limit=limit, tags=tag, since=since, until=until
    )

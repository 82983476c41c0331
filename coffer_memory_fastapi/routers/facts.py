"""Facts of a store's knowledge lane: add, list, get, edit, delete, clear."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response

from coffer_memory import MemoryConflict
from coffer_memory.vocabulary import DEFAULT_LIST_LIMIT, MAX_CURSOR_CHARS, MAX_LIST_LIMIT

from ..deps import AsyncService, clean, etag, if_match
from ..errors import error_responses
from ..reply import reply
from ..schemas import CLEAR, FACT, FACT_MUTATION, FACT_PAGE, FactIn, FactPatch
from .recall import Since, TagFilter, Until

router = APIRouter(prefix="/api/v1/memory_stores/{name}/facts", tags=["facts"])

IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description=(
            'The fact\'s ETag (its sha256, quoted: "<sha256>"), or a comma-separated list of ETags, '
            "or * (any current file). Compared strongly (RFC 9110): a weak tag (W/...) never matches. "
            "When no tag matches the file, 412 MEMORY_CONFLICT and nothing is written."
        ),
    ),
]
_ETAG: dict[str, Any] = {
    "ETag": {"description": "The fact file's sha256, quoted.", "schema": {"type": "string"}}
}


@router.post(
    "",
    status_code=201,
    response_model=FACT_MUTATION.model,
    responses={**error_responses(404), 201: {"headers": _ETAG, "description": "The fact was written."}},
)
async def add_fact(name: str, body: FactIn, svc: AsyncService) -> Response:
    """Write a new fact to ``knowledge/inbox/`` of the store and index it."""
    clean(body.title, "title")
    clean(body.description, "description")
    r = await svc.remember(
        body.text,
        title=body.title,
        description=body.description,
        store=name,
        actor="user",
        tags=body.tags,
        origin_session_id=body.origin_session_id,
    )
    return reply(FACT_MUTATION, r, status_code=201, headers=etag(r.record.sha256))


@router.get("", response_model=FACT_PAGE.model, responses=error_responses(404))
async def list_facts(
    name: str,
    svc: AsyncService,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = DEFAULT_LIST_LIMIT,
    cursor: Annotated[
        str | None, Query(max_length=MAX_CURSOR_CHARS, description="next_cursor of the last page.")
    ] = None,
    tag: TagFilter = None,
    since: Since = None,
    until: Until = None,
) -> Response:
    """Facts newest first, ``limit`` at a time; a cursor from another store or query is INVALID_INPUT."""
    page = await svc.list_facts(store=name, limit=limit, cursor=cursor, tags=tag, since=since, until=until)
    return reply(FACT_PAGE, page)


@router.delete("", response_model=CLEAR.model, responses=error_responses(404))
async def clear_facts(name: str, svc: AsyncService) -> Response:
    """Delete every fact of the knowledge lane (the other lanes stay)."""
    return reply(CLEAR, await svc.clear(store=name))


@router.get(
    "/{fact_id}",
    response_model=FACT.model,
    responses={**error_responses(404), 200: {"headers": _ETAG, "description": "The fact."}},
)
async def get_fact(name: str, fact_id: str, svc: AsyncService) -> Response:
    """One fact, read from its file; the ETag is the file's sha256."""
    record = await svc.get_fact(fact_id, store=name)
    return reply(FACT, record, headers=etag(record.sha256))


async def _expected(svc: AsyncService, name: str, fact_id: str, match: str | None) -> str | None:
    """The sha256 to compare-and-swap on for ``If-Match`` (None: unconditional). One tag is
    passed on; for a list (or only weak tags) the one the file has now, or ``MemoryConflict``
    when none is (the write then compares again, so a change in between is still a 412)."""
    tags = if_match(match)
    if tags is None or len(tags) == 1:
        return tags[0] if tags else None
    current = (await svc.get_fact(fact_id, store=name)).sha256
    if current in tags:
        return current
    raise MemoryConflict(name, fact_id, tags[0] if tags else (match or "").strip(), current)


@router.patch(
    "/{fact_id}",
    response_model=FACT_MUTATION.model,
    responses={
        **error_responses(404, 412),
        200: {"headers": _ETAG, "description": "The fact was rewritten."},
    },
)
async def edit_fact(
    name: str, fact_id: str, body: FactPatch, svc: AsyncService, match: IfMatch = None
) -> Response:
    """Rewrite a fact; with ``If-Match`` only if the file still has that sha256."""
    clean(body.title, "title")
    clean(body.description, "description")
    r = await svc.edit_fact(
        fact_id,
        body=body.text,
        title=body.title,
        description=body.description,
        expected_sha256=await _expected(svc, name, fact_id, match),
        store=name,
        tags=body.tags,
    )
    return reply(FACT_MUTATION, r, headers=etag(r.record.sha256))


@router.delete("/{fact_id}", response_model=FACT_MUTATION.model, responses=error_responses(404, 412))
async def delete_fact(name: str, fact_id: str, svc: AsyncService, match: IfMatch = None) -> Response:
    """Delete a fact file and its index rows; with ``If-Match`` only if unchanged."""
    expected = await _expected(svc, name, fact_id, match)
    return reply(FACT_MUTATION, await svc.delete_fact(fact_id, expected_sha256=expected, store=name))

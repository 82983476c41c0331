"""Facts of a store's knowledge lane: add, list, get, edit, delete, clear."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response

from coffer_memory import FactRecord, MutationResult
from coffer_memory.vocabulary import DEFAULT_LIST_LIMIT, MAX_CURSOR_CHARS, MAX_LIST_LIMIT

from ..deps import AsyncService, clean, etag, if_match
from ..errors import error_responses
from ..schemas import ClearOut, FactIn, FactMutationOut, FactOut, FactPageOut, FactPatch
from .recall import Since, TagFilter, Until

router = APIRouter(prefix="/api/v1/memory_stores/{name}/facts", tags=["facts"])

IfMatch = Annotated[
    str | None,
    Header(alias="If-Match", description="The fact's sha256 (its ETag); a mismatch is 412 MEMORY_CONFLICT."),
]
_ETAG: dict[str, Any] = {
    "ETag": {"description": "The fact file's sha256, quoted.", "schema": {"type": "string"}}
}


def _mutation(r: MutationResult) -> FactMutationOut:
    sha = r.after_sha256 if r.after_sha256 is not None else r.before_sha256
    assert sha is not None
    fact = FactOut.of(FactRecord(fact=r.fact, store=r.store, path=r.path, sha256=sha))
    receipt = r.receipt
    return FactMutationOut(
        fact=fact,
        before_sha256=r.before_sha256,
        after_sha256=r.after_sha256,
        created=r.created,
        redacted=dict(receipt.findings) if receipt is not None else {},
        index_pending=receipt is not None and receipt.index_pending,
    )


@router.post(
    "",
    status_code=201,
    response_model=FactMutationOut,
    responses={**error_responses(404), 201: {"headers": _ETAG, "description": "The fact was written."}},
)
async def add_fact(name: str, body: FactIn, svc: AsyncService, response: Response) -> FactMutationOut:
    """Write a new fact to ``knowledge/inbox/`` of the store and index it."""
    clean(body.title, "title")
    clean(body.description, "description")
    r = await svc.remember(
        body.text, title=body.title, description=body.description, store=name, actor="user", tags=body.tags
    )
    out = _mutation(r)
    response.headers.update(etag(out.fact.sha256))
    return out


@router.get("", response_model=FactPageOut, responses=error_responses(404))
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
) -> FactPageOut:
    """Facts newest first, ``limit`` at a time; a cursor from another store or query is INVALID_INPUT."""
    page = await svc.list_facts(store=name, limit=limit, cursor=cursor, tags=tag, since=since, until=until)
    return FactPageOut(items=[FactOut.of(r) for r in page.items], next_cursor=page.next_cursor)


@router.delete("", response_model=ClearOut, responses=error_responses(404))
async def clear_facts(name: str, svc: AsyncService) -> ClearOut:
    """Delete every fact of the knowledge lane (the other lanes stay)."""
    r = await svc.clear(store=name)
    return ClearOut(store=r.store, deleted=r.deleted, paths=[str(p) for p in r.paths])


@router.get(
    "/{fact_id}",
    response_model=FactOut,
    responses={**error_responses(404), 200: {"headers": _ETAG, "description": "The fact."}},
)
async def get_fact(name: str, fact_id: str, svc: AsyncService, response: Response) -> FactOut:
    """One fact, read from its file; the ETag is the file's sha256."""
    record = await svc.get_fact(fact_id, store=name)
    response.headers.update(etag(record.sha256))
    return FactOut.of(record)


@router.patch(
    "/{fact_id}",
    response_model=FactMutationOut,
    responses={
        **error_responses(404, 412),
        200: {"headers": _ETAG, "description": "The fact was rewritten."},
    },
)
async def edit_fact(
    name: str, fact_id: str, body: FactPatch, svc: AsyncService, response: Response, match: IfMatch = None
) -> FactMutationOut:
    """Rewrite a fact; with ``If-Match`` only if the file still has that sha256."""
    clean(body.title, "title")
    clean(body.description, "description")
    r = await svc.edit_fact(
        fact_id,
        body=body.text,
        title=body.title,
        description=body.description,
        expected_sha256=if_match(match),
        store=name,
        tags=body.tags,
    )
    out = _mutation(r)
    response.headers.update(etag(out.fact.sha256))
    return out


@router.delete("/{fact_id}", response_model=FactMutationOut, responses=error_responses(404, 412))
async def delete_fact(name: str, fact_id: str, svc: AsyncService, match: IfMatch = None) -> FactMutationOut:
    """Delete a fact file and its index rows; with ``If-Match`` only if unchanged."""
    return _mutation(await svc.delete_fact(fact_id, expected_sha256=if_match(match), store=name))

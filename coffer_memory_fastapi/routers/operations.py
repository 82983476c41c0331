"""Long-running operations: start organize / reorg / reindex, then poll."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from ..deps import Ops, Service
from ..errors import error_responses
from ..operations import Outcome
from ..schemas import REINDEX, OperationListOut, OperationOut, OrganizeResultOut

router = APIRouter(tags=["operations"])
DryRun = Annotated[bool, Query(description="Compute the changes as diffs and write nothing.")]
_LOCATION = {"Location": {"description": "Where to poll the operation.", "schema": {"type": "string"}}}
_STARTED: dict[int | str, dict[str, Any]] = {
    202: {"headers": _LOCATION, "description": "Queued; poll the Location."}
}


def _accepted(op: OperationOut, response: Response) -> OperationOut:
    response.headers["Location"] = f"/api/v1/operations/{op.id}"
    return op


@router.post(
    "/api/v1/memory_stores/{name}/organize",
    status_code=202,
    response_model=OperationOut,
    responses={**error_responses(404, 503), **_STARTED},
)
def start_organize(
    name: str, svc: Service, ops: Ops, response: Response, dry_run: DryRun = False
) -> OperationOut:
    """Start filing the inbox into topic documents and rules (a no-op without a configured model)."""
    store = svc.target(store=name).store
    svc.organizer.model()  # a provider set without what it needs is refused now, not a failed operation

    def work() -> Outcome:
        return OrganizeResultOut.of(svc.organize(store, dry_run=dry_run))

    return _accepted(ops.start("organize", store, work), response)


@router.post(
    "/api/v1/memory_stores/{name}/reorg",
    status_code=202,
    response_model=OperationOut,
    responses={**error_responses(404, 503), **_STARTED},
)
def start_reorg(
    name: str, svc: Service, ops: Ops, response: Response, dry_run: DryRun = False
) -> OperationOut:
    """Start merging duplicate and splitting long topic documents (bounded tool loop)."""
    store = svc.target(store=name).store
    svc.organizer.model()  # a provider set without what it needs is refused now, not a failed operation

    def work() -> Outcome:
        return OrganizeResultOut.of(svc.reorganize(store, dry_run=dry_run))

    return _accepted(ops.start("reorg", store, work), response)


@router.post(
    "/api/v1/memory_stores/{name}/reindex",
    status_code=202,
    response_model=OperationOut,
    responses={**error_responses(404), **_STARTED},
)
def start_reindex(
    name: str,
    svc: Service,
    ops: Ops,
    response: Response,
    rebuild: Annotated[bool, Query(description="Drop the store's index rows first.")] = False,
) -> OperationOut:
    """Start a full reconcile of the store's index with its files."""
    store = svc.target(store=name).store

    def work() -> Outcome:
        return [REINDEX.build(r) for r in svc.reindex(store, rebuild=rebuild)]

    return _accepted(ops.start("reindex", store, work), response)


@router.get("/api/v1/operations", response_model=OperationListOut, responses=error_responses())
def list_operations(ops: Ops) -> OperationListOut:
    """Operations of this server process, newest first."""
    return OperationListOut(items=ops.list())


@router.get("/api/v1/operations/{op_id}", response_model=OperationOut, responses=error_responses(404))
def get_operation(op_id: str, ops: Ops) -> OperationOut:
    """One operation's status, and its result or error once finished."""
    return ops.get(op_id)

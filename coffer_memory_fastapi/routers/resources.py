"""The seed's kind-agnostic resource routes, for memory stores: thin over the same service methods.

A memory store is a resource of kind ``memory`` whose ``config`` is its MemoryStoreConfig. Stores
come into being with their first write, so there is no create route here.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from coffer_memory import InvalidInput

from ..deps import AsyncService
from ..errors import error_responses
from ..store_schemas import ResourceListOut, ResourceOut, ResourcePatchIn

router = APIRouter(prefix="/api/v1/resources", tags=["resources"])

KINDS = ("memory", "knowledge_base")


@router.get("", response_model=ResourceListOut, responses=error_responses())
async def list_resources(
    svc: AsyncService,
    kind: Annotated[str | None, Query(description="'memory' (the only kind served here).")] = None,
) -> ResourceListOut:
    """Every memory store on disk, as resources; ``kind=knowledge_base`` is empty here."""
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"unknown resource kind {kind!r}; one of {', '.join(KINDS)}", field="kind")
    if kind == "knowledge_base":
        return ResourceListOut(items=[])
    return ResourceListOut(
        items=[ResourceOut.of(info, await svc.store_config(info.name)) for info in await svc.stores()]
    )


@router.get("/{name}", response_model=ResourceOut, responses=error_responses(404))
async def get_resource(name: str, svc: AsyncService) -> ResourceOut:
    """One memory store as a resource, with its configuration."""
    return ResourceOut.of(await svc.store_info(name), await svc.store_config(name))


@router.patch("/{name}", response_model=ResourceOut, responses=error_responses(404))
async def patch_resource(name: str, body: ResourcePatchIn, svc: AsyncService) -> ResourceOut:
    """Change the store's config (a JSON merge patch; legacy embedding keys are ignored)."""
    view = await svc.set_store_config(name, body.config)
    return ResourceOut.of(await svc.store_info(name), view)


@router.delete("/{name}", response_model=ResourceOut, responses=error_responses(404))
async def delete_resource(name: str, svc: AsyncService) -> ResourceOut:
    """Delete the store (as ``DELETE /api/v1/memory_stores/{name}``); answers with it as it was."""
    view = await svc.store_config(name)
    return ResourceOut.of(await svc.delete_store(name), view)

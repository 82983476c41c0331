"""Stores: list, get, metrics, label, delete, config, merge."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from coffer_memory import MemoryScope, StoreInfo
from coffer_memory.vocabulary import MAX_JOURNAL_DAYS

from ..deps import AsyncService, check_cwd
from ..errors import error_responses
from ..reply import JsonReply, reply
from ..schemas import STORE, STORE_LIST, STORE_METRICS, LabelIn
from ..store_schemas import MemoryStoreConfigOut, MergeIn, StoreMergeOut

router = APIRouter(prefix="/api/v1/memory_stores", tags=["stores"])


def _store(info: StoreInfo) -> JsonReply:
    return reply(STORE, info, exists=info.store_dir.is_dir())


@router.get("", response_model=STORE_LIST.model, responses=error_responses())
async def list_stores(svc: AsyncService) -> Response:
    """Every store that exists on disk."""
    items = [STORE.dump(s, exists=s.store_dir.is_dir()) for s in await svc.stores()]
    return reply(STORE_LIST, None, items=items)


@router.get("/{name}", response_model=STORE.model, responses=error_responses(404))
async def get_store(name: str, svc: AsyncService) -> Response:
    """One store. A well-formed name that has no folder yet answers with ``exists: false``."""
    return _store(await svc.store_info(name))


@router.get("/{name}/metrics", response_model=STORE_METRICS.model, responses=error_responses(404))
async def store_metrics(name: str, svc: AsyncService) -> Response:
    """How many facts, journal days, handoff scenes and rules files a store holds."""
    info = await svc.store_info(name)
    project = info.scope is MemoryScope.PROJECT
    journal = len(await svc.journal(store=info.name, limit=MAX_JOURNAL_DAYS)) if project else 0
    return reply(
        STORE_METRICS,
        info,
        journal_files=journal,
        handoff_scenes=len(await svc.handoffs(store=info.name)),
        rules_files=len((await svc.rules(store=info.name)).files),
        consolidation_log=(await svc.consolidation_log(store=info.name)).text is not None,
    )


@router.put("/{name}/label", response_model=STORE.model, responses=error_responses(404))
async def set_label(name: str, body: LabelIn, svc: AsyncService) -> Response:
    """Set the store's display label (its name never changes)."""
    return _store(await svc.set_label(name, body.label))


@router.delete("/{name}/label", response_model=STORE.model, responses=error_responses(404))
async def clear_label(name: str, svc: AsyncService) -> Response:
    """Remove the label; the display name falls back to the project folder's name."""
    return _store(await svc.clear_label(name))


@router.delete("/{name}", response_model=STORE.model, responses=error_responses(404, 422))
async def delete_store(name: str, svc: AsyncService) -> Response:
    """Delete a project store: its folder, index rows, label and root (audited ``store_deleted``).

    Answers with the store as it was. The global store cannot be deleted (``422 INVALID_INPUT``).
    """
    return _store(await svc.delete_store(name))


@router.get("/{name}/config", response_model=MemoryStoreConfigOut, responses=error_responses(404))
async def get_config(name: str, svc: AsyncService) -> MemoryStoreConfigOut:
    """The store's MemoryStoreConfig as it runs (the home's ``[memory]`` with the store's own keys over it)."""
    return MemoryStoreConfigOut.of(await svc.store_config(name))


@router.patch("/{name}/config", response_model=MemoryStoreConfigOut, responses=error_responses(404))
async def patch_config(
    name: str,
    changes: Annotated[
        dict[str, Any],
        Body(
            description="A JSON merge patch of settings (null removes the store's own value).",
            examples=[{"max_fact_chars": 4000, "default_mode": "grep"}],
        ),
    ],
    svc: AsyncService,
) -> MemoryStoreConfigOut:
    """Change the store's own settings, kept in its store.json (audited ``store_configured``).

    The seed's legacy flat ``embedding_*`` fields are accepted and ignored (listed in ``ignored``
    and ``notes``). An unknown, home-only or managed key, or a bad value, is ``422 INVALID_INPUT``.
    """
    return MemoryStoreConfigOut.of(await svc.set_store_config(name, changes))


@router.post("/{name}/merge", response_model=StoreMergeOut, responses=error_responses(404))
async def merge_store(name: str, body: MergeIn, svc: AsyncService) -> StoreMergeOut:
    """Merge this project store into ``into`` and retire it (the seed's consolidate; audited ``store_merged``).

    Add-only and idempotent: merged again, it answers ``already_merged: true`` and writes nothing.
    With ``dry_run`` it reports what would move and writes nothing. Merging a store into itself
    or merging the global store is ``422 INVALID_INPUT``. ``into`` that holds no memory yet is
    ``404 MEMORY_STORE_NOT_FOUND`` unless ``cwd`` names the checkout whose store it is (a second
    clone's, as ``coffer recall`` there offers); the server's own directory never counts.
    """
    cwd = None if body.cwd is None else check_cwd(body.cwd)
    # Never the server's own directory: a client that names no checkout gets none.
    merged = await svc.merge_stores(name, body.into, dry_run=body.dry_run, cwd=cwd, checkout=cwd is not None)
    return StoreMergeOut.of(merged)

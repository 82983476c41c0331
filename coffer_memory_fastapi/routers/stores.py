"""Stores: list, get, metrics, label, delete."""

from __future__ import annotations

from fastapi import APIRouter, Response

from coffer_memory import MemoryScope, StoreInfo
from coffer_memory.vocabulary import MAX_JOURNAL_DAYS

from ..deps import AsyncService
from ..errors import error_responses
from ..reply import JsonReply, reply
from ..schemas import STORE, STORE_LIST, STORE_METRICS, LabelIn

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

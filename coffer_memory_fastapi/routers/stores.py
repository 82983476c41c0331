"""Stores: list, get, metrics, label, delete."""

from __future__ import annotations

from fastapi import APIRouter

from coffer_memory import MemoryScope
from coffer_memory.vocabulary import MAX_JOURNAL_DAYS

from ..deps import Service
from ..errors import error_responses
from ..schemas import LabelIn, MemoryStoreListOut, MemoryStoreMetricsOut, MemoryStoreOut

router = APIRouter(prefix="/api/v1/memory_stores", tags=["stores"])


@router.get("", response_model=MemoryStoreListOut, responses=error_responses())
def list_stores(svc: Service) -> MemoryStoreListOut:
    """Every store that exists on disk."""
    return MemoryStoreListOut(items=[MemoryStoreOut.of(s) for s in svc.stores()])


@router.get("/{name}", response_model=MemoryStoreOut, responses=error_responses(404))
def get_store(name: str, svc: Service) -> MemoryStoreOut:
    """One store. A well-formed name that has no folder yet answers with ``exists: false``."""
    return MemoryStoreOut.of(svc.store_info(name))


@router.get("/{name}/metrics", response_model=MemoryStoreMetricsOut, responses=error_responses(404))
def store_metrics(name: str, svc: Service) -> MemoryStoreMetricsOut:
    """How many facts, journal days, handoff scenes and rules files a store holds."""
    info = svc.store_info(name)
    project = info.scope is MemoryScope.PROJECT
    journal = len(svc.journal(store=info.name, limit=MAX_JOURNAL_DAYS)) if project else 0
    return MemoryStoreMetricsOut(
        name=info.name,
        store_dir=str(info.store_dir),
        fact_count=info.fact_count,
        journal_files=journal,
        handoff_scenes=len(svc.handoffs(store=info.name)),
        rules_files=len(svc.rules(store=info.name).files),
        consolidation_log=svc.consolidation_log(store=info.name).text is not None,
    )


@router.put("/{name}/label", response_model=MemoryStoreOut, responses=error_responses(404))
def set_label(name: str, body: LabelIn, svc: Service) -> MemoryStoreOut:
    """Set the store's display label (its name never changes)."""
    return MemoryStoreOut.of(svc.set_label(name, body.label))


@router.delete("/{name}/label", response_model=MemoryStoreOut, responses=error_responses(404))
def clear_label(name: str, svc: Service) -> MemoryStoreOut:
    """Remove the label; the display name falls back to the project folder's name."""
    return MemoryStoreOut.of(svc.clear_label(name))


@router.delete("/{name}", response_model=MemoryStoreOut, responses=error_responses(404, 422))
def delete_store(name: str, svc: Service) -> MemoryStoreOut:
    """Delete a project store: its folder, index rows, label and root (audited ``store_deleted``).

    Answers with the store as it was. The global store cannot be deleted (``422 INVALID_INPUT``).
    """
    return MemoryStoreOut.of(svc.delete_store(name))

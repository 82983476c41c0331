"""``Organizer``: the LLM-driven consolidation of a store (organize, reorganize, auto-organize).

A component of ``MemoryService`` (also reachable as ``svc.organizer``). With no model
configured every call is a no-op.
"""

from __future__ import annotations

import logging

from .._core import WriteEvents
from .._errors import CofferError
from .._indexing import Models
from ..plugins.hookspecs import LLM
from .auto import Debouncer
from .models import OrganizeReport, ReorgReport
from .organizer import organize_store
from .reorg import reorganize_store
from .tools import OrganizeTools

__all__ = ["Organizer"]

log = logging.getLogger("coffer_memory._organize")


class Organizer:
    """Organize and reorganize stores; re-arms the auto-organize timer after every new fact."""

    def __init__(self, tools: OrganizeTools, models: Models, events: WriteEvents) -> None:
        self.tools = tools
        self.models = models
        self._debouncer: Debouncer | None = None
        events.subscribe(self._after_write)

    @property
    def llm(self) -> LLM | None:
        """The configured internal model, or None (``[llm] provider = "none"``, the default)."""
        return self.models.llm()

    def organize(self, store: str, *, dry_run: bool = False) -> OrganizeReport:
        """File the store's inbox into topic documents and rules (``dry_run``: diffs only, no writes)."""
        return organize_store(self.tools, self.llm, self.tools.writer.paths(store).name, dry_run=dry_run)

    def reorganize(self, store: str, *, dry_run: bool = False) -> ReorgReport:
        """Merge duplicate and split long topic documents with a bounded tool loop."""
        return reorganize_store(self.tools, self.llm, self.tools.writer.paths(store).name, dry_run=dry_run)

    def _after_write(self, store: str) -> None:
        settings = self.tools.settings.organize
        if not settings.auto:
            return
        try:
            llm = self.llm
        except CofferError as exc:  # the fact is written and indexed: a write never fails for this
            log.warning("auto-organize skipped after a write to %s: %s", store, exc)
            return
        if llm is None:
            return
        if self._debouncer is None:
            self._debouncer = Debouncer(settings.auto_delay_seconds, self._auto_organize)
        self._debouncer.notify(store)

    def _auto_organize(self, store: str) -> None:
        report = self.organize(store)
        log.info("auto-organized %s: %s", store, [c.action for c in report.changes])

    def close(self) -> None:
        """Cancel pending auto-organize passes (waiting for a running one)."""
        if self._debouncer is not None:
            self._debouncer.close()
            self._debouncer = None

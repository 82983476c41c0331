"""MemoryService methods of the organizer: organize, reorganize, auto-organize."""

from __future__ import annotations

import logging

from ..core import ServiceCore
from ..lanes import LanesMixin
from ..plugins.hookspecs import LLM
from ..plugins.manager import get_llm
from .auto import Debouncer
from .models import OrganizeReport, ReorgReport
from .organizer import organize_store
from .reorg import reorganize_store

log = logging.getLogger("coffer_memory.organize")


class OrganizeMixin(LanesMixin, ServiceCore):
    """The LLM-driven consolidation of a store. With no model configured every call is a no-op."""

    _llm_loaded = False
    _llm: LLM | None = None
    _debouncer: Debouncer | None = None

    @property
    def llm(self) -> LLM | None:
        """The configured internal model, or None (``[llm] provider = "none"``, the default)."""
        if not self._llm_loaded:
            self._llm = get_llm(self.settings.llm)
            self._llm_loaded = True
        return self._llm

    def organize(self, store: str, *, dry_run: bool = False) -> OrganizeReport:
        """File the store's inbox into topic documents and rules (``dry_run``: diffs only, no writes)."""
        return organize_store(self, self.llm, self.paths(store).name, dry_run=dry_run)

    def reorganize(self, store: str, *, dry_run: bool = False) -> ReorgReport:
        """Merge duplicate and split long topic documents with a bounded tool loop."""
        return reorganize_store(self, self.llm, self.paths(store).name, dry_run=dry_run)

    def _after_write(self, store: str) -> None:
        if not self.settings.organize.auto or self.llm is None:
            return
        if self._debouncer is None:
            self._debouncer = Debouncer(self.settings.organize.auto_delay_seconds, self._auto_organize)
        self._debouncer.notify(store)

    def _auto_organize(self, store: str) -> None:
        report = self.organize(store)
        log.info("auto-organized %s: %s", store, [c.action for c in report.changes])

    def close(self) -> None:
        """Cancel pending auto-organize passes (waiting for a running one), then close the index."""
        if self._debouncer is not None:
            self._debouncer.close()
            self._debouncer = None
        super().close()

"""``Organizer``: the LLM-driven consolidation of a store (organize, reorganize, auto-organize).

A component of ``MemoryService`` (also reachable as ``svc.organizer``). With no model
configured (``[llm] provider = "none"``) every call is a no-op; a provider that cannot run here
(``openai`` without ``model``, a plugin's LLM whose ``available()`` is false) is an error.
"""

from __future__ import annotations

import logging

from .._core import WriteEvents
from .._errors import CofferError, InvalidInput
from .._indexing import Models
from .._llm import LLMUnavailable
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

    def model(self) -> LLM | None:
        """The model a pass runs with: None when none is configured (the pass is a no-op).

        A provider that is set but cannot run here raises: ``InvalidInput`` (field ``llm.model``)
        for ``openai`` without a model, ``LLMUnavailable`` for a plugin's LLM whose
        ``available()`` is false. Both were a ``no_model`` report ("nothing to do", exit 0),
        which read as if the half-made setting were fine.
        """
        llm = self.llm
        if llm is None or llm.available():
            return llm
        settings = self.tools.settings.llm
        if settings.provider == "openai" and not settings.model:
            raise InvalidInput(
                "the [llm] provider 'openai' has no model: set llm.model "
                "(`coffer config set llm.model NAME`), or llm.provider to none",
                field="llm.model",
            )
        raise LLMUnavailable(
            f"the [llm] provider {settings.provider!r} is not available here (its plugin's available() is false)",
            model=settings.model,
        )

    def organize(self, store: str, *, dry_run: bool = False) -> OrganizeReport:
        """File the store's inbox into topic documents and rules (``dry_run``: diffs only, no writes)."""
        name = self.tools.writer.paths(store).name
        return organize_store(self.tools, self.model(), name, dry_run=dry_run)

    def reorganize(self, store: str, *, dry_run: bool = False) -> ReorgReport:
        """Merge duplicate and split long topic documents with a bounded tool loop."""
        name = self.tools.writer.paths(store).name
        return reorganize_store(self.tools, self.model(), name, dry_run=dry_run)

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
        try:
            report = self.organize(store)
        except CofferError as exc:  # a setting to fix, said on one line (the write stands)
            log.warning("auto-organize of %s skipped: %s: %s", store, exc.code, exc.message)
            return
        log.info("auto-organized %s: %s", store, [c.action for c in report.changes])

    def close(self) -> None:
        """Cancel pending auto-organize passes (waiting for a running one)."""
        if self._debouncer is not None:
            self._debouncer.close()
            self._debouncer = None

"""The facade's calls on a store's lanes: the knowledge lane's facts (remember, recall, list, get,
edit, delete, clear), then the journal, handoff, rules, consolidation log, INDEX.md and the
session-start bundle.

What an agent uses within a session. Each forwards to ``svc.facts`` (built with the service) or
``svc.lanes`` (built on first use).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ._service_parts import ServiceParts

if TYPE_CHECKING:
    from ._models import (
        Actor,
        ClearResult,
        ConsolidationLog,
        FactRecord,
        HandoffScene,
        JournalFile,
        LaneWrite,
        MutationResult,
        Page,
        RecallResult,
        ResumeResult,
        RulesView,
    )
    from ._targets import PathLike
    from .vocabulary import Scope

__all__ = ["LaneCalls"]


class LaneCalls(ServiceParts):
    """``MemoryService``'s calls on the facts and the other lanes of a store."""

    # -- facts ---------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        title: str | None = None,
        description: str | None = None,
        scope: Scope = "project",
        store: str | None = None,
        cwd: PathLike | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
        tags: Iterable[str] = (),
    ) -> MutationResult:
        """Write a new fact (with ``tags``) to ``knowledge/inbox/<slug>.md`` of the store and index it.

        ``origin_session_id`` names the agent session (or chat) the fact comes from: the facts of one
        session, in the order they were remembered, lend each other score in recall, so a reply is
        found through what it answers (docs/concepts.md).
        """
        return self.facts.remember(
            text,
            title=title,
            description=description,
            scope=scope,
            store=store,
            cwd=cwd,
            actor=actor,
            origin_session_id=origin_session_id,
            tags=tags,
        )

    def recall(
        self,
        query: str,
        *,
        cwd: PathLike | None = None,
        stores: Iterable[str] | None = None,
        mode: str | None = None,
        limit: int = 10,
        tags: Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> RecallResult:
        """Search the stores of ``cwd`` (project, then global) or the named ``stores``; only facts
        with every one of ``tags``, updated in ``[since, until)``.

        ``mode`` is one of ``"grep"``, ``"keyword"``, ``"vector"`` or ``"hybrid"``; None takes the
        first store's ``default_mode`` (``"keyword"`` unless set); a mode must be in the store's
        ``retrieval_modes`` (``["grep", "keyword"]`` unless set: docs/vector.md turns on the
        others). A vector or hybrid recall whose embedder cannot run answers by keyword and says
        so (``result.fallback``). ``limit``: 1 to 200 hits.
        ``since`` / ``until``: a datetime, an ISO 8601 text or a relative one (``"-7d"``); a date
        without a zone is UTC. Outside a git repository only the global store is searched.

        Raises ``InvalidInput`` (an empty or over-long ``query``, a ``limit`` out of range, an
        unknown or disabled ``mode``, a bad time bound, a ``cwd`` that is no directory),
        ``MemoryStoreNotFound`` (a named store that does not exist) and ``IndexUnavailable`` (the
        index cannot be read): each a ``CofferError`` with its ``code``.
        """
        return self.facts.recall(
            query, cwd=cwd, stores=stores, mode=mode, limit=limit, tags=tags, since=since, until=until
        )

    def list_facts(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        limit: int = 50,
        cursor: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Page[FactRecord]:
        """Facts of the knowledge lane, newest first, ``limit`` at a time with an opaque cursor;
        ``tags``, ``since`` and ``until`` filter as in ``recall``."""
        return self.facts.list_facts(
            store=store,
            cwd=cwd,
            scope=scope,
            limit=limit,
            cursor=cursor,
            tags=tags,
            since=since,
            until=until,
        )

    def get_fact(
        self, fact_id: str, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> FactRecord:
        """One fact, read from its file, with its path and sha256."""
        return self.facts.get_fact(fact_id, store=store, cwd=cwd, scope=scope)

    def edit_fact(
        self,
        fact_id: str,
        *,
        body: str | None = None,
        title: str | None = None,
        description: str | None = None,
        expected_sha256: str | None = None,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
        tags: Iterable[str] | None = None,
    ) -> MutationResult:
        """Rewrite a fact (compare-and-swap on ``expected_sha256``) and re-index it; ``tags``
        replaces its tags (``None`` keeps them). An empty ``title`` or ``description`` is derived
        from the text again, as ``remember`` does (``None`` keeps it)."""
        return self.facts.edit_fact(
            fact_id,
            body=body,
            title=title,
            description=description,
            expected_sha256=expected_sha256,
            store=store,
            cwd=cwd,
            scope=scope,
            actor=actor,
            tags=tags,
        )

    def delete_fact(
        self,
        fact_id: str,
        *,
        expected_sha256: str | None = None,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
    ) -> MutationResult:
        """Delete a fact file, then its index rows."""
        return self.facts.delete_fact(
            fact_id, expected_sha256=expected_sha256, store=store, cwd=cwd, scope=scope
        )

    def clear(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> ClearResult:
        """Delete every fact of the knowledge lane (the store and its other lanes stay)."""
        return self.facts.clear(store=store, cwd=cwd, scope=scope)

    # -- lanes ---------------------------------------------------------------------------------
    def journal_append(
        self,
        text: str,
        *,
        cwd: PathLike | None = None,
        store: str | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
        dry_run: bool = False,
    ) -> LaneWrite:
        """Append an entry to today's ``journal/<YYYY-MM-DD>.md`` and index that file at once. The
        day is the local one (``TZ``, else the system's zone), as the entry's heading says."""
        return self.lanes.journal_append(
            text, cwd=cwd, store=store, actor=actor, origin_session_id=origin_session_id, dry_run=dry_run
        )

    def journal(
        self, *, cwd: PathLike | None = None, store: str | None = None, limit: int = 30
    ) -> list[JournalFile]:
        """The journal's day files, newest period first (at most ``limit``)."""
        return self.lanes.journal(cwd=cwd, store=store, limit=limit)

    def delete_journal(
        self, period: str, *, cwd: PathLike | None = None, store: str | None = None
    ) -> LaneWrite:
        """Delete one day of the journal (and its index rows); logged and audited."""
        return self.lanes.delete_journal(period, cwd=cwd, store=store)

    def save_handoff(self, text: str, *, cwd: PathLike | None = None) -> LaneWrite:
        """Save where work stands on the current branch (one scene per branch; replaces the last)."""
        return self.lanes.save_handoff(text, cwd=cwd)

    def resume(self, *, cwd: PathLike | None = None) -> ResumeResult:
        """The handoff of this project and branch, and whether HEAD has moved since it was written."""
        return self.lanes.resume(cwd=cwd)

    def handoffs(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> list[HandoffScene]:
        """Every branch's handoff scene in a store, newest first."""
        return self.lanes.handoffs(store=store, cwd=cwd, scope=scope)

    def delete_handoff(
        self, branch: str, *, store: str | None = None, cwd: PathLike | None = None
    ) -> LaneWrite:
        """Delete one branch's handoff; logged and audited."""
        return self.lanes.delete_handoff(branch, store=store, cwd=cwd)

    def rules(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> RulesView:
        """Every rules file of the store concatenated (``rules/rules.md`` first)."""
        return self.lanes.rules(store=store, cwd=cwd, scope=scope)

    def append_rule(
        self,
        text: str,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
    ) -> LaneWrite:
        """Append a rule to ``rules/rules.md`` (delivered at session start, never through recall)."""
        return self.lanes.append_rule(text, store=store, cwd=cwd, scope=scope, actor=actor)

    def delete_rules(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> list[LaneWrite]:
        """Delete every rules file of the store; logged and audited."""
        return self.lanes.delete_rules(store=store, cwd=cwd, scope=scope)

    def consolidation_log(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> ConsolidationLog:
        """The organizer's changelog of a store (``text`` is None when there is none)."""
        return self.lanes.consolidation_log(store=store, cwd=cwd, scope=scope)

    def log_change(self, store: str, action: str, detail: str, *, at: datetime | None = None) -> None:
        """Append one line to the store's consolidation log."""
        return self.lanes.log_change(store, action, detail, at=at)

    def delete_consolidation_log(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> LaneWrite:
        """Delete the consolidation log (not logged in itself); audited."""
        return self.lanes.delete_consolidation_log(store=store, cwd=cwd, scope=scope)

    def regenerate_index(self, store: str) -> Path | None:
        """Rewrite ``knowledge/INDEX.md`` from the topic documents (only when it changes)."""
        return self.lanes.regenerate_index(store)

    def archive_version(self, store: str, path: Path, *, replaced_by: str | None) -> Path:
        """Copy a topic document to ``superseded/<slug>-<ts>.md`` before it is overwritten or retired."""
        return self.lanes.archive_version(store, path, replaced_by=replaced_by)

    def assemble_session_context(self, cwd: PathLike | None = None) -> str:
        """The bundle an agent gets at session start (<= 10,000 characters; read-only, no audit)."""
        return self.lanes.assemble_session_context(cwd)

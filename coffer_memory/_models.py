"""Frozen value objects returned by the core. Pydantic lives only at the JSON edges."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import attrs

from . import _notebook as notebook
from . import vocabulary
from .vocabulary import MemoryScope as MemoryScope

# Defined in ``vocabulary``; kept here for the many modules that import them from ``models``.
Actor: TypeAlias = vocabulary.Actor
RetrievalMode: TypeAlias = vocabulary.RetrievalMode
RETRIEVAL_MODES = vocabulary.RETRIEVAL_MODES

T = TypeVar("T")


@attrs.frozen
class Target:
    """Where a call lands, resolved once from ``store=`` or ``cwd`` + ``scope``.

    ``project_root`` (the main checkout), ``worktree`` (this checkout) and ``branch`` are known
    when the target came from a working directory inside a git repository.
    """

    store: str
    scope: MemoryScope
    project_id: str
    store_dir: Path
    project_root: Path | None = None
    branch: str | None = None
    worktree: Path | None = None


@attrs.frozen
class WriteReceipt:
    """What one step of the write transaction did to one file.

    ``action`` is created | replaced | appended | deleted; ``before_sha256`` is None for a new
    file and ``after_sha256`` None for a deletion. ``findings`` counts what the content checks
    changed, by kind (never the values). ``index_pending`` says the file is durable but its index
    rows are not written yet (the next read indexes it).
    """

    store: str
    path: Path
    action: Literal["created", "replaced", "appended", "deleted"]
    before_sha256: str | None
    after_sha256: str | None
    dry_run: bool = False
    findings: tuple[tuple[str, int], ...] = ()
    index_pending: bool = False

    def pending(self) -> WriteReceipt:
        """This receipt, with the index marked pending."""
        return attrs.evolve(self, index_pending=True)


@attrs.frozen
class MemoryFact:
    """In-memory view of one fact file (frontmatter + body)."""

    id: str
    title: str
    description: str
    body: str
    actor: Actor
    origin_session_id: str | None
    created_at: datetime
    updated_at: datetime
    tags: tuple[str, ...] = ()

    def to_record(self) -> dict[str, Any]:
        """One row: a column per field (tags as a list)."""
        return notebook.fields(self)

    def _repr_html_(self) -> str:
        return notebook.fact_html(self.to_record())

    def _repr_markdown_(self) -> str:
        return notebook.fact_markdown(self.to_record())


@attrs.frozen
class FactRecord:
    """A fact together with where it lives on disk and the sha256 of the file's bytes."""

    fact: MemoryFact
    store: str
    path: Path
    sha256: str

    def to_record(self) -> dict[str, Any]:
        """One row: the fact's fields, then store, path and sha256."""
        return {**self.fact.to_record(), "store": self.store, "path": str(self.path), "sha256": self.sha256}

    def _repr_html_(self) -> str:
        return notebook.fact_html(self.to_record())

    def _repr_markdown_(self) -> str:
        return notebook.fact_markdown(self.to_record())

    @property
    def folder_path(self) -> Path:
        """The folder that holds the fact file."""
        return self.path.parent


@attrs.frozen
class MutationResult:
    """What a write did: the fact after it, its file, and the file's sha256 before and after.

    ``before_sha256`` is ``None`` for a new file, ``after_sha256`` is ``None`` for a deletion.
    ``target`` says where the call landed and ``receipt`` what the write transaction did (its
    ``findings`` count redacted secrets by kind, ``index_pending`` says the file is durable but
    not indexed yet). ``created`` is False when ``remember`` found the same title and text already
    in the store's inbox and wrote nothing (a retry after a lost answer), and for edits and deletes.
    """

    fact: MemoryFact
    store: str
    path: Path
    before_sha256: str | None
    after_sha256: str | None
    target: Target | None = None
    receipt: WriteReceipt | None = None
    created: bool = True


@attrs.frozen
class ClearResult:
    """What ``clear`` removed from a store's knowledge lane."""

    store: str
    deleted: int
    paths: tuple[Path, ...]
    target: Target | None = None


@attrs.frozen
class MemoryHit:
    """One recall hit. ``score`` is the per-store score of the mode that found it."""

    id: str
    text: str
    score: float
    source: str
    time: datetime
    store: str = ""
    path: Path | None = None
    title: str = ""


_HIT_COLUMNS = ("title", "text", "score", "store", "time", "id")
_ITEM_COLUMNS = ("id", "updated_at", "title", "tags", "body")


@attrs.frozen
class RecallResult:
    """Hits merged across stores, the mode that answered, and whether it degraded.

    In a notebook it shows as a table; ``pandas.DataFrame(result.to_records())`` gives one
    column per hit field.
    """

    hits: tuple[MemoryHit, ...]
    mode: RetrievalMode
    fallback: bool = False
    stores: tuple[str, ...] = ()
    targets: tuple[Target, ...] = ()

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per hit, best first: a column per ``MemoryHit`` field."""
        return [notebook.record_of(h) for h in self.hits]

    def _caption(self) -> str:
        fell = ", fell back to keyword" if self.fallback else ""
        n = len(self.hits)
        return f"{n} hit{'' if n == 1 else 's'}, mode {self.mode}{fell}; stores: {', '.join(self.stores)}"

    def _repr_html_(self) -> str:
        return notebook.html_table(self.to_records(), _HIT_COLUMNS, self._caption())

    def _repr_markdown_(self) -> str:
        return notebook.md_table(self.to_records(), _HIT_COLUMNS, self._caption())


@attrs.frozen
class Page(Generic[T]):
    """One page of a bounded listing; ``next_cursor`` is ``None`` on the last page.

    ``pandas.DataFrame(page.to_records())`` gives one column per field of the items.
    """

    items: tuple[T, ...]
    next_cursor: str | None
    target: Target | None = None

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per item (a fact's fields, then store, path and sha256)."""
        return [notebook.record_of(i) for i in self.items]

    def _display(self) -> tuple[list[dict[str, Any]], tuple[str, ...], str]:
        rows = self.to_records()
        keys = rows[0].keys() if rows else ()
        columns = tuple(c for c in _ITEM_COLUMNS if c in keys) or tuple(keys)
        more = "; more with next_cursor" if self.next_cursor else ""
        return rows, columns, f"{len(rows)} items{more}"

    def _repr_html_(self) -> str:
        return notebook.html_table(*self._display())

    def _repr_markdown_(self) -> str:
        return notebook.md_table(*self._display())


@attrs.frozen
class ResolvedScope:
    """A scope resolved from a working directory."""

    scope: MemoryScope
    project_id: str
    store_name: str
    store_dir: Path
    project_root: Path | None = None
    branch: str | None = None


@attrs.frozen
class StoreInfo:
    """A store as listed: identity, display name, where it lives, how many facts it has."""

    name: str
    scope: MemoryScope
    project_id: str
    store_dir: Path
    fact_count: int
    label: str | None
    project_root: str | None

    @property
    def display_name(self) -> str:
        """Label first, then the basename of the recorded project root, then the store name."""
        if self.label:
            return self.label
        if self.project_root:
            return Path(self.project_root).name or self.name
        return "global" if self.scope is MemoryScope.GLOBAL else self.name


@attrs.frozen
class ReindexReport:
    """What one reconcile or reindex pass did to one store."""

    store: str
    scanned: int
    added: int
    updated: int
    removed: int
    unchanged: int
    skipped: tuple[str, ...] = ()

    @property
    def changed(self) -> int:
        """How many documents the pass wrote or removed."""
        return self.added + self.updated + self.removed


@attrs.frozen
class BrokenFile:
    """A file of a store's recall lanes that is not indexed, and why (unparsable frontmatter, over
    the size cap, a name that is not UTF-8, not a regular file)."""

    store: str
    path: Path
    error: str


@attrs.frozen
class DoctorReport:
    """Health of a home: index versus files, broken files, grep backend, and ``index_repairs``:
    each damaged or foreign ``index.db`` that was moved aside and rebuilt (when, why, where to)."""

    home: Path
    grep_backend: str
    ripgrep_path: str | None
    sqlite_version: str
    stores: tuple[StoreInfo, ...]
    broken: tuple[BrokenFile, ...]
    index_mismatches: tuple[str, ...]
    agents: tuple[str, ...] = ()
    """One line per agent coffer is installed for: its MCP server answers, or what is wrong."""
    agent_problems: tuple[str, ...] = ()
    """What stands between an installed agent and a working coffer (also in ``agents``)."""
    index_repairs: tuple[str, ...] = ()
    """Damaged index files moved aside and rebuilt since this process opened the home."""

    links: tuple[Path, ...] = ()
    """Symbolic links inside a store: coffer never reads or writes through them."""
    same_repository: tuple[str, ...] = ()
    """Stores that hold memory of one repository (a second clone), each with the command to merge."""
    opted_out: tuple[str, ...] = ()
    """Stores whose repository opted out of coffer's automation (``.coffer-optout``, ``[projects] exclude``)."""


    @property
    def ok(self) -> bool:
        """True when nothing is broken, no store holds a link, the index agrees with the files and
        installed agents work."""
        return not self.broken and not self.index_mismatches and not self.links and not self.agent_problems


@attrs.frozen
class LaneWrite:
    """What a lane write or delete did: the file and its sha256 before and after."""

    store: str
    path: Path
    before_sha256: str | None
    after_sha256: str | None
    target: Target | None = None
    receipt: WriteReceipt | None = None


@attrs.frozen
class JournalEntry:
    """One entry of a journal day: when, by whom, from which agent session, and its text.

    ``origin_session_id`` is the session a distilled entry came from (None for one written by
    hand or by ``journal_append`` without one). A hand-written section without coffer's heading
    belongs to the entry before it.
    """

    at: datetime
    actor: str
    origin_session_id: str | None
    text: str


@attrs.frozen
class JournalFile:
    """One day of a store's journal lane, with its entries parsed (``entries``)."""

    period: str
    text: str
    path: Path
    entries: tuple[JournalEntry, ...] = ()

    @property
    def origin_session_ids(self) -> tuple[str, ...]:
        """The sessions this day's entries came from, in order, without repeats."""
        return tuple(dict.fromkeys(e.origin_session_id for e in self.entries if e.origin_session_id))

    @property
    def folder_path(self) -> Path:
        """The journal folder."""
        return self.path.parent


@attrs.frozen
class HandoffScene:
    """The handoff note of one branch: where work stood, and at which commit."""

    branch: str
    text: str
    updated_at: datetime
    head: str | None
    path: Path

    @property
    def folder_path(self) -> Path:
        """The handoff folder."""
        return self.path.parent


@attrs.frozen
class ResumeResult:
    """The handoff of the current project and branch, and what happened since it was written."""

    store: str
    branch: str
    head: str | None
    scene: HandoffScene | None
    head_moved: bool
    new_commits: tuple[str, ...] | None  # None when the handoff's commit is no longer in history
    target: Target | None = None
    notes: tuple[str, ...] = ()  # e.g. another store of this repository, with the command to merge it

    @property
    def summary(self) -> str:
        """A readable account for an agent or a person."""
        notes = ["", *self.notes] if self.notes else []
        if self.scene is None:
            return "\n".join([f"No handoff saved for branch {self.branch!r}.", *notes])
        lines = [
            f"Handoff for branch {self.branch!r}, saved {self.scene.updated_at.isoformat()}:",
            "",
            self.scene.text,
        ]
        if self.head_moved:
            if self.new_commits is None:
                lines += ["", f"HEAD moved since then and {self.scene.head} is no longer in its history."]
            elif self.new_commits:
                lines += ["", f"HEAD moved since then; {len(self.new_commits)} new commit(s):"]
                lines += [f"- {c}" for c in self.new_commits]
            else:
                lines += ["", "HEAD moved since then (no new commits on top of the handoff's commit)."]
        return "\n".join(lines + notes)


@attrs.frozen
class RulesView:
    """Every rules file of a store, concatenated (rules.md first)."""

    store: str
    text: str
    files: tuple[Path, ...]
    folder: Path | None = None


@attrs.frozen
class ConsolidationLog:
    """The store's organizer changelog; ``text`` is None when it does not exist."""

    store: str
    text: str | None
    path: Path

    @property
    def folder_path(self) -> Path:
        """The store folder."""
        return self.path.parent

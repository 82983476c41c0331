"""Frozen value objects returned by the core. Pydantic lives only at the JSON edges."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Literal, TypeAlias, TypeVar

import attrs

from . import _notebook as notebook
from . import vocabulary
from ._localtime import local_text
from .vocabulary import MemoryScope as MemoryScope

# Defined in ``vocabulary``; kept here for the many modules that import them from ``models``.
Actor: TypeAlias = vocabulary.Actor
RetrievalMode: TypeAlias = vocabulary.RetrievalMode
RETRIEVAL_MODES = vocabulary.RETRIEVAL_MODES

T = TypeVar("T")


def about(description: str, **limits: int) -> dict[str, Any]:
    """A field's metadata: what it means, in one sentence, and the limits the core enforces on it
    (``max_length``, ``item_max_length``...). Every face derives its field from this (``_wire.py``).
    """
    return {"description": description, **limits}


_STORE = about("'global' or 'project-<26-char ULID>'.")


@attrs.frozen
class Target:
    """Where a call lands, resolved once from ``store=`` or ``cwd`` + ``scope``.

    ``project_root`` (the main checkout), ``worktree`` (this checkout) and ``branch`` are known
    when the target came from a working directory inside a git repository.
    """

    store: str = attrs.field(metadata=_STORE)
    scope: MemoryScope
    project_id: str
    store_dir: Path
    project_root: Path | None = None
    branch: str | None = attrs.field(default=None, metadata=about("The git branch checked out, if any."))
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
    findings: tuple[tuple[str, int], ...] = attrs.field(
        default=(), metadata=about("Secrets replaced by [REDACTED:<kind>] before writing, by kind.")
    )
    index_pending: bool = attrs.field(
        default=False, metadata=about("The file is durable but not indexed yet; the next read indexes it.")
    )

    def pending(self) -> WriteReceipt:
        """This receipt, with the index marked pending."""
        return attrs.evolve(self, index_pending=True)


@attrs.frozen
class MemoryFact:
    """In-memory view of one fact file (frontmatter + body)."""

    id: str = attrs.field(metadata=about("The fact's id (a ULID)."))
    title: str = attrs.field(
        metadata=about(
            "A short title (default: from the first line).",
            max_length=vocabulary.MAX_TITLE_CHARS,
        )
    )
    description: str = attrs.field(
        metadata=about(
            "One line saying what the fact is about (default: derived).",
            max_length=vocabulary.MAX_DESCRIPTION_CHARS,
        )
    )
    body: str = attrs.field(metadata=about("The fact itself: the Markdown body of its file."))
    actor: Actor = attrs.field(metadata=about("Who wrote it: 'agent' or 'user'."))
    origin_session_id: str | None = attrs.field(
        metadata=about("The agent session it was distilled from, if any.")
    )
    created_at: datetime = attrs.field(metadata=about("When the fact was first written."))
    updated_at: datetime = attrs.field(metadata=about("When the fact was last changed."))
    tags: tuple[str, ...] = attrs.field(
        default=(),
        metadata=about(
            "Tags, stored lowercased; no comma or line break.",
            max_length=vocabulary.MAX_TAGS,
            item_min_length=1,
            item_max_length=vocabulary.MAX_TAG_CHARS,
        ),
    )

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
    store: str = attrs.field(metadata=_STORE)
    path: Path = attrs.field(metadata=about("Absolute path of the fact's .md file."))
    sha256: str = attrs.field(
        metadata=about("sha256 of the file's bytes; also the ETag. Send it back as If-Match.")
    )

    def to_record(self) -> dict[str, Any]:
        """One row: the fact's fields, then store, path and sha256."""
        return {**self.fact.to_record(), "store": self.store, "path": str(self.path), "sha256": self.sha256}

    def _repr_html_(self) -> str:
        return notebook.fact_html(self.to_record())

    def _repr_markdown_(self) -> str:
        return notebook.fact_markdown(self.to_record())

    @property
    def folder_path(self) -> Path:
        """Absolute path of the folder holding the fact file."""
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
    store: str = attrs.field(metadata=_STORE)
    path: Path = attrs.field(metadata=about("Absolute path of the fact's .md file."))
    before_sha256: str | None = attrs.field(metadata=about("sha256 of the file before; null for a new fact."))
    after_sha256: str | None = attrs.field(metadata=about("sha256 of the file after; null after a delete."))
    target: Target | None = None
    receipt: WriteReceipt | None = None
    created: bool = attrs.field(
        default=True,
        metadata=about("False when the same fact was already there (nothing written)."),
    )

    @property
    def record(self) -> FactRecord:
        """The fact after the write (before it, for a delete) with its file and that file's sha256."""
        sha = self.after_sha256 if self.after_sha256 is not None else self.before_sha256
        assert sha is not None  # a write has a file before it, after it, or both
        return FactRecord(fact=self.fact, store=self.store, path=self.path, sha256=sha)


@attrs.frozen
class ClearResult:
    """What ``clear`` removed from a store's knowledge lane."""

    store: str = attrs.field(metadata=_STORE)
    deleted: int = attrs.field(metadata=about("How many fact files were deleted."))
    paths: tuple[Path, ...] = attrs.field(metadata=about("Absolute paths of the deleted files."))
    target: Target | None = None


@attrs.frozen
class MemoryHit:
    """One recall hit. ``score`` is the per-store score of the mode that found it."""

    id: str = attrs.field(metadata=about("The id of the fact (or journal day) that matched."))
    text: str = attrs.field(metadata=about("The matching text."))
    score: float = attrs.field(metadata=about("The score of the mode that found it, within its own store."))
    source: str = attrs.field(
        metadata=about(
            "'<scope>:<absolute path of the file>' with scope 'global' or 'project' (the file is a "
            "fact or a journal day)."
        )
    )
    time: datetime = attrs.field(metadata=about("When the document was last changed."))
    store: str = attrs.field(default="", metadata=_STORE)
    path: Path | None = attrs.field(
        default=None, metadata=about("Absolute path of the Markdown file that holds it.")
    )
    title: str = attrs.field(default="", metadata=about("The document's title."))


_HIT_COLUMNS = ("title", "text", "score", "store", "time", "id")
_ITEM_COLUMNS = ("id", "updated_at", "title", "tags", "body")


@attrs.frozen
class RecallResult:
    """Hits merged across stores, the mode that answered, and whether it degraded.

    In a notebook it shows as a table; ``pandas.DataFrame(result.to_records())`` gives one
    column per hit field.
    """

    hits: tuple[MemoryHit, ...] = attrs.field(metadata=about("The hits, best first."))
    mode: RetrievalMode = attrs.field(metadata=about("The retrieval mode that answered."))
    fallback: bool = attrs.field(
        default=False, metadata=about("True when the asked mode was unavailable and recall degraded.")
    )
    stores: tuple[str, ...] = attrs.field(
        default=(), metadata=about("The stores searched: the project's (in a git repo), then global.")
    )
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

    items: tuple[T, ...] = attrs.field(metadata=about("The items of this page."))
    next_cursor: str | None = attrs.field(
        metadata=about("Pass it back as `cursor` for the next page; null on the last.")
    )
    target: Target | None = None

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per item (a fact's fields, then store, path and sha256)."""
        return [notebook.record_of(i) for i in self.items]

    def _display(self) -> tuple[list[dict[str, Any]], tuple[str, ...], str]:
        rows = self.to_records()
        keys = rows[0].keys() if rows else ()
        columns = tuple(c for c in _ITEM_COLUMNS if c in keys) or tuple(keys)
        more = "; more with next_cursor" if self.next_cursor else ""
        return rows, columns, f"{len(rows)} item{'' if len(rows) == 1 else 's'}{more}"

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

    name: str = attrs.field(metadata=_STORE)
    scope: MemoryScope = attrs.field(metadata=about("'global' or 'project'."))
    project_id: str = attrs.field(metadata=about("The project's ULID ('global' for the global store)."))
    store_dir: Path = attrs.field(metadata=about("Absolute path of the store's folder."))
    fact_count: int = attrs.field(metadata=about("How many facts the store holds."))
    label: str | None = attrs.field(
        metadata=about("The display label set by the user, if any.", max_length=vocabulary.MAX_LABEL_CHARS)
    )
    project_root: str | None = attrs.field(metadata=about("The project's main checkout, as last seen."))

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

    store: str = attrs.field(metadata=_STORE)
    scanned: int = attrs.field(metadata=about("Files looked at."))
    added: int = attrs.field(metadata=about("Documents indexed for the first time."))
    updated: int = attrs.field(metadata=about("Documents re-indexed because their file changed."))
    removed: int = attrs.field(metadata=about("Documents dropped because their file is gone."))
    unchanged: int = attrs.field(metadata=about("Documents whose file did not change."))
    skipped: tuple[str, ...] = attrs.field(
        default=(), metadata=about("Files that could not be indexed, and why.")
    )

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
    """Damaged index files moved aside and rebuilt (the last 20), and repairs of ``ledger.db``
    (lines that begin ``ledger.db:``)."""

    links: tuple[Path, ...] = ()
    """Symbolic links inside a store: coffer never reads or writes through them."""
    hard_links: tuple[str, ...] = ()
    """Markdown files of a store that have other names (hard links), one line each: indexed as
    any file (``cp -al`` backups and sync tools make them), said so that one sharing its text
    with a file outside the store is seen. They do not make the report fail."""
    same_repository: tuple[str, ...] = ()
    """Stores that hold memory of one repository (a second clone), each with the command to merge."""
    opted_out: tuple[str, ...] = ()
    """Stores whose repository opted out of coffer's automation (``.coffer-optout``, ``[projects] exclude``)."""
    vector_problem: str | None = None
    """Why the enabled vector and hybrid modes answer from keyword (what is missing, what to install)."""
    shared_index: str | None = None
    """The shared index backend (``[index] backend``) and the memory folder it follows; None without one."""
    embedder: str | None = None
    """The embedder vector and hybrid recall use (provider, model id, dimensions), e.g.
    ``hash (model hash-bow-64, 64 dimensions)``; None when no vector mode is on or none can run."""
    vectors_waiting: tuple[str, ...] = ()
    """One line per store whose documents still wait for their vectors (vector recall does not
    find them until they are in): how many, and why (another process is embedding them, the
    embedder failed and is retried later, or the next read embeds them)."""

    @property
    def ok(self) -> bool:
        """True when nothing is broken, no store holds a link, the index agrees with the files,
        installed agents work and the enabled vector modes can run."""
        return (
            not self.broken
            and not self.index_mismatches
            and not self.links
            and not self.agent_problems
            and not self.vector_problem
        )


@attrs.frozen
class LaneWrite:
    """What a lane write or delete did: the file and its sha256 before and after."""

    store: str = attrs.field(metadata=_STORE)
    path: Path = attrs.field(metadata=about("Absolute path of the file written or deleted."))
    before_sha256: str | None = attrs.field(metadata=about("sha256 of the file before; null for a new file."))
    after_sha256: str | None = attrs.field(metadata=about("sha256 of the file after; null after a delete."))
    target: Target | None = None
    receipt: WriteReceipt | None = None


@attrs.frozen
class JournalEntry:
    """One entry of a journal day: when, by whom, from which agent session, and its text.

    ``origin_session_id`` is the session a distilled entry came from (None for one written by
    hand or by ``journal_append`` without one). A hand-written section without coffer's heading
    belongs to the entry before it.
    """

    at: datetime = attrs.field(
        metadata=about("When the entry was written, with the UTC offset its heading states.")
    )
    actor: str = attrs.field(metadata=about("Who wrote it: agent or user."))
    origin_session_id: str | None = attrs.field(
        metadata=about("The agent session a distilled entry came from (null for one written by hand).")
    )
    text: str = attrs.field(metadata=about("The entry's text (Markdown)."))


@attrs.frozen
class JournalFile:
    """One day of a store's journal lane, with its entries parsed (``entries``)."""

    period: str = attrs.field(metadata=about("The day: YYYY-MM-DD."))
    text: str = attrs.field(metadata=about("The day's entries (Markdown)."))
    path: Path = attrs.field(metadata=about("Absolute path of the day's file."))
    entries: tuple[JournalEntry, ...] = attrs.field(
        default=(), metadata=about("The day's entries one by one, each with its provenance.")
    )

    @property
    def origin_session_ids(self) -> tuple[str, ...]:
        """The sessions this day's entries came from, in order, without repeats."""
        return tuple(dict.fromkeys(e.origin_session_id for e in self.entries if e.origin_session_id))

    @property
    def folder_path(self) -> Path:
        """Absolute path of the journal folder."""
        return self.path.parent


@attrs.frozen
class HandoffScene:
    """The handoff note of one branch: where work stood, and at which commit."""

    branch: str = attrs.field(
        metadata=about("The git branch the handoff is for (its name now, if renamed since it was saved).")
    )
    text: str = attrs.field(metadata=about("The handoff note."))
    updated_at: datetime = attrs.field(metadata=about("When the handoff was saved."))
    head: str | None = attrs.field(metadata=about("The commit checked out when the handoff was saved."))
    path: Path = attrs.field(metadata=about("Absolute path of the handoff file."))
    saved_as: str | None = attrs.field(
        default=None,
        metadata=about(
            "The branch's name when the handoff was saved, when it was renamed since (git branch -m)"
            " and branch is its name now; null otherwise. The file is named after it."
        ),
    )
    renamed_to: str | None = attrs.field(
        default=None,
        metadata=about(
            "The name the branch was renamed to since, when that branch saved a handoff of its own:"
            " this one is stale (delete it by its branch); null otherwise."
        ),
    )

    @property
    def folder_path(self) -> Path:
        """Absolute path of the handoff folder."""
        return self.path.parent


@attrs.frozen
class ResumeResult:
    """The handoff of the current project and branch, and what happened since it was written."""

    store: str = attrs.field(metadata=_STORE)
    branch: str = attrs.field(metadata=about("The git branch checked out now."))
    head: str | None = attrs.field(metadata=about("The commit checked out now."))
    scene: HandoffScene | None = attrs.field(
        metadata=about("The handoff saved for this branch (under an earlier name if it was renamed), if any.")
    )
    head_moved: bool = attrs.field(metadata=about("Whether HEAD moved since the handoff was saved."))
    new_commits: tuple[str, ...] | None = attrs.field(
        metadata=about("Commits since the handoff (oneline); null when its commit left the history.")
    )
    target: Target | None = None
    notes: tuple[str, ...] = ()  # e.g. another store of this repository, with the command to merge it

    @property
    def summary(self) -> str:
        """A readable account of the handoff and what changed since."""
        notes = ["", *self.notes] if self.notes else []
        if self.scene is None:
            return "\n".join([f"No handoff saved for branch {self.branch!r}.", *notes])
        # A scene saved before the branch was renamed (`git branch -m`) names its old name.
        saved_as = self.scene.saved_as or self.scene.branch
        renamed = f" (now {self.branch!r})" if saved_as != self.branch else ""
        lines = [
            f"Handoff for branch {saved_as!r}{renamed}, saved {local_text(self.scene.updated_at)}:",
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

    store: str = attrs.field(metadata=_STORE)
    text: str = attrs.field(metadata=about("Every rules file, concatenated (empty when there are none)."))
    files: tuple[Path, ...] = attrs.field(
        metadata=about("Absolute paths of the rules files, rules.md first.")
    )
    folder: Path = attrs.field(metadata=about("Absolute path of the rules folder."))


@attrs.frozen
class ConsolidationLog:
    """The store's organizer changelog; ``text`` is None when it does not exist."""

    store: str = attrs.field(metadata=_STORE)
    text: str | None = attrs.field(metadata=about("The changelog; null when the file does not exist."))
    path: Path = attrs.field(metadata=about("Absolute path of consolidation-log.md."))

    @property
    def folder_path(self) -> Path:
        """Absolute path of the store folder."""
        return self.path.parent

"""Value objects of import and export: what a source plans to write, and what an import or export did."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import attrs

from .._models import Actor

ImportKind = Literal["coffer", "claude-code", "rules", "mcp-memory", "basic-memory"]
IMPORT_KINDS: tuple[ImportKind, ...] = ("coffer", "claude-code", "rules", "mcp-memory", "basic-memory")
ExportFormat = Literal["zip", "jsonl"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("zip", "jsonl")
Action = Literal["created", "updated", "unchanged", "conflict", "skipped"]
# The frontmatter key (facts) and comment tag (rules files) that carry an import's provenance.
PROVENANCE_KEY = "imported"


@attrs.frozen
class Provenance:
    """Where an imported entry came from: the source kind, the file, the id it had there, and
    the sha256 of its content there (what makes a second import a no-op)."""

    source: str
    path: str
    original_id: str
    sha256: str

    def to_meta(self, body_sha256: str) -> dict[str, str]:
        """The mapping kept in the written file (plus the sha256 of the body as written)."""
        return {**attrs.asdict(self), "body_sha256": body_sha256}


@attrs.frozen
class FileItem:
    """A whole truth file to restore byte for byte (a coffer export).

    Its bytes are read when asked for (``data``), one member at a time, not held: an archive of
    any size is imported in the memory of a few files. ``sha256`` is theirs, checked once already.
    """

    store: str
    relpath: str
    load: Callable[[], bytes] = attrs.field(eq=False, repr=False)
    sha256: str
    size: int

    @property
    def data(self) -> bytes:
        """The file's bytes, read (and checked against ``sha256``) again at each call."""
        return self.load()


@attrs.frozen
class FactItem:
    """A new fact for the knowledge lane's inbox."""

    store: str
    title: str
    body: str
    provenance: Provenance
    description: str | None = None
    tags: tuple[str, ...] = ()
    created_at: datetime | None = None
    actor: Actor = "user"


@attrs.frozen
class RuleItem:
    """A rules file of its own, ``rules/<slug>.md`` (delivered at session start)."""

    store: str
    slug: str
    text: str
    provenance: Provenance


Item = FileItem | FactItem | RuleItem


@attrs.frozen
class Skipped:
    """A source entry that is not imported, and why (no project store found, an empty file...)."""

    source: str
    reason: str


@attrs.frozen
class ImportEntry:
    """What an import did (or, in a dry run, would do) with one source entry.

    ``action``: created | updated (the source changed since the last import and the copy was not
    edited here) | unchanged (imported before: nothing written) | conflict (the file here differs
    and is kept) | skipped (``reason`` says why). ``findings`` counts redacted secrets by kind.
    """

    action: Action
    source: str
    store: str | None = None
    path: Path | None = None
    original_id: str | None = None
    reason: str | None = None
    findings: tuple[tuple[str, int], ...] = ()

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        record = attrs.asdict(self)
        record["path"] = str(self.path) if self.path is not None else None
        record["findings"] = dict(self.findings)
        return record


@attrs.frozen
class ImportReport:
    """The outcome of ``import_memory``: one entry per source entry, in source order."""

    kind: ImportKind
    source: str
    dry_run: bool
    entries: tuple[ImportEntry, ...]

    @property
    def counts(self) -> dict[str, int]:
        """How many entries took each action."""
        return dict(Counter(e.action for e in self.entries))

    @property
    def written(self) -> int:
        """Files created or updated (would be, in a dry run)."""
        return sum(1 for e in self.entries if e.action in ("created", "updated"))

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "kind": self.kind,
            "source": self.source,
            "dry_run": self.dry_run,
            "counts": self.counts,
            "written": self.written,
            "entries": [e.to_record() for e in self.entries],
        }


@attrs.frozen
class ExportReport:
    """What ``export_memory`` wrote: the format, the stores, how many files and bytes, and the
    sha256 of the output."""

    format: ExportFormat
    stores: tuple[str, ...]
    files: int
    size: int
    sha256: str
    path: Path | None = None

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        record = attrs.asdict(self)
        record["path"] = str(self.path) if self.path is not None else None
        record["stores"] = list(self.stores)
        return record

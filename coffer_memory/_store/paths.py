"""The one module that builds on-disk paths of a coffer home, and rejects traversal.

Layout (the seed's)::

    <home>/memory/global/...                 store "global"
    <home>/memory/projects/<ULID>/...        store "project-<ULID>"
        knowledge/inbox/<slug>.md            new facts
        knowledge/<topic>.md                 topic documents
        knowledge/INDEX.md                   derived, outside recall
        rules/*.md  journal/<YYYY-MM-DD>.md  handoff/<branch>.md  superseded/  consolidation-log.md
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import unicodedata
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from .._errors import PATH_ECHO_LIMIT, InvalidInput, MemoryStoreNotFound, safe_echo
from .._home import HomeLayout
from .._scope import GLOBAL_PROJECT_ID
from .._ulid_text import CROCKFORD
from ..vocabulary import MemoryScope

if TYPE_CHECKING:
    from .looks import Looks

GLOBAL_STORE = "global"
_STORE_RE = re.compile(rf"^project-([0-7][{CROCKFORD}]{{25}})$")
INDEX_MD = "INDEX.md"
_PERIOD_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_SLUG_CHARS = 64
_SURROGATE = re.compile("[\ud800-\udfff]")


def validate_store_name(name: object) -> str:
    """Return ``name`` if it is ``global`` or ``project-<26-char ULID>``; else MemoryStoreNotFound."""
    if isinstance(name, str) and (name == GLOBAL_STORE or _STORE_RE.fullmatch(name)):
        return name
    raise MemoryStoreNotFound(str(name))


def store_name_for_project(project_id: str) -> str:
    """``project-<ULID>`` for a project id."""
    return validate_store_name(f"project-{project_id}")


def project_id_of(store: str) -> str:
    """The project id a store name stands for (the global sentinel for ``global``)."""
    validate_store_name(store)
    return GLOBAL_PROJECT_ID if store == GLOBAL_STORE else store.removeprefix("project-")


def scope_of(store: str) -> MemoryScope:
    """``MemoryScope.GLOBAL`` or ``MemoryScope.PROJECT`` for a valid store name."""
    validate_store_name(store)
    return MemoryScope.GLOBAL if store == GLOBAL_STORE else MemoryScope.PROJECT


def slugify(text: str, *, fallback: str = "memory") -> str:
    """A filesystem-safe slug: lowercase words joined by '-', Unicode letters kept, <= 64 chars."""
    text = unicodedata.normalize("NFKC", text).lower()
    slug = re.sub(r"[^\w]+", "-", text, flags=re.UNICODE).strip("-_")
    slug = slug[:MAX_SLUG_CHARS].rstrip("-_")
    if not slug or slug in {".", ".."}:
        return fallback
    return slug


@attrs.frozen
class StorePaths:
    """Paths of one store under a home's ``memory/`` folder."""

    memory_dir: Path
    name: str

    @classmethod
    def of(cls, memory_dir: Path, name: str) -> StorePaths:
        """Paths for a validated store name."""
        return cls(memory_dir=memory_dir, name=validate_store_name(name))

    @functools.cached_property  # every read asks a store's folders several times
    def root(self) -> Path:
        """The store folder."""
        if self.name == GLOBAL_STORE:
            return self.memory_dir / "global"
        return self.memory_dir / "projects" / project_id_of(self.name)

    @functools.cached_property
    def knowledge(self) -> Path:
        """The knowledge lane (recall searches here)."""
        return self.root / "knowledge"

    @property
    def inbox(self) -> Path:
        """Where new facts land."""
        return self.knowledge / "inbox"

    @property
    def index_md(self) -> Path:
        """The derived, human-facing INDEX.md (outside recall)."""
        return self.knowledge / INDEX_MD

    @property
    def rules(self) -> Path:
        """The rules lane folder."""
        return self.root / "rules"

    @property
    def journal(self) -> Path:
        """The journal lane folder (project stores)."""
        return self.root / "journal"

    @property
    def handoff(self) -> Path:
        """The handoff lane folder."""
        return self.root / "handoff"

    @property
    def superseded(self) -> Path:
        """Tombstones of retired topic versions."""
        return self.root / "superseded"

    @property
    def consolidation_log(self) -> Path:
        """The organizer's append-only changelog."""
        return self.root / "consolidation-log.md"

    def linked_store(self, looks: Looks | None = None) -> str | None:
        """Where the store's folder points when it is a symbolic link into the home's memory
        folder (another store's folder), else None. Such a store is neither read nor written:
        through the link a repository's reads answered with another repository's facts as its
        own, and its writes landed there (``store.json`` too). A folder linked outside the home
        (one a sync tool keeps) is a store's folder as any other. ``looks``: the call's ``Looks``,
        whose one look at the folder answers (asked on every call that resolves a store)."""
        root = self.root
        if not (os.path.islink(root) if looks is None else looks.is_link(self.name, root)):
            return None
        memory = os.path.realpath(self.memory_dir) + os.sep
        return os.readlink(root) if os.path.realpath(root).startswith(memory) else None

    def refuse_linked(self, field: str = "store", looks: Looks | None = None) -> None:
        """``InvalidInput`` naming the link when the store's folder is linked to another store's
        folder (``linked_store``, and there ``looks``)."""
        target = self.linked_store(looks)
        if target is not None:
            raise InvalidInput(
                f"the folder of store {self.name} is a symbolic link to another store's folder "
                f"({safe_echo(target, PATH_ECHO_LIMIT)}); coffer never reads or writes through one: "
                f"remove the link {self.root}",
                field=field,
                store=self.name,
            )

    def recall_dirs(self) -> tuple[Path, ...]:
        """Folders whose Markdown files are searched by recall."""
        return (self.knowledge, self.journal)

    def inbox_file(self, slug: str) -> Path:
        """``knowledge/inbox/<slug>.md`` for a slug made by ``slugify``."""
        if slug != slugify(slug, fallback="") or not slug:
            raise InvalidInput(f"invalid slug {safe_echo(slug)!r}", field="slug")
        return self.inbox / f"{slug}.md"

    def journal_file(self, period: str) -> Path:
        """``journal/<YYYY-MM-DD>.md``; the period must be a real calendar date."""
        if not isinstance(period, str) or not _PERIOD_RE.fullmatch(period):
            raise InvalidInput(
                f"journal period must be YYYY-MM-DD, not {safe_echo(period)!r}", field="period"
            )
        try:
            date.fromisoformat(period)
        except ValueError:
            raise InvalidInput(f"{safe_echo(period)!r} is not a calendar date", field="period") from None
        return self.journal / f"{period}.md"

    def handoff_file(self, branch: str) -> Path:
        """``handoff/<branch-slug>.md`` for a branch name (``feature/x`` -> ``feature-x``)."""
        if not isinstance(branch, str) or not branch.strip() or len(branch) > 250 or "\x00" in branch:
            raise InvalidInput(f"invalid branch name {safe_echo(branch)!r}", field="branch")
        if not branch.isascii() and _SURROGATE.search(branch):  # hashed below as UTF-8
            raise InvalidInput(
                "branch name contains a lone surrogate (not valid Unicode text)", field="branch"
            )
        slug = slugify(branch, fallback="head")
        if slug != branch:  # "feature/x" and "feature-x" must not share a file
            slug = f"{slug}-{hashlib.sha256(branch.encode()).hexdigest()[:6]}"
        return self.handoff / f"{slug}.md"

    def rules_file(self, slug: str = "rules") -> Path:
        """``rules/<slug>.md`` (``rules/rules.md`` by default)."""
        if slug != slugify(slug, fallback=""):
            raise InvalidInput(f"invalid rules file name {safe_echo(slug)!r}", field="slug")
        return self.rules / f"{slug}.md"

    def superseded_file(self, slug: str, stamp: str) -> Path:
        """``superseded/<slug>-<stamp>.md``: a retired topic version."""
        if slug != slugify(slug, fallback="") or not re.fullmatch(r"[0-9TZ]+", stamp):
            raise InvalidInput(
                f"invalid tombstone name {safe_echo(slug)!r}-{safe_echo(stamp)!r}", field="slug"
            )
        return self.superseded / f"{slug}-{stamp}.md"

    def topic_file(self, slug: str) -> Path:
        """``knowledge/<slug>.md``: an organized topic document (never INDEX)."""
        if slug != slugify(slug, fallback="") or slug.lower() == "index":
            raise InvalidInput(f"invalid topic name {safe_echo(slug)!r}", field="slug")
        return self.knowledge / f"{slug}.md"

    def relative(self, path: Path) -> str:
        """``path`` relative to the store root, POSIX style; rejects anything outside it."""
        resolved = Path(os.path.abspath(path))
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            raise InvalidInput(f"{path} is outside store {self.name}", field="path") from None
        return rel.as_posix()

    def resolve_relative(self, rel: str) -> Path:
        """The absolute path of a store-relative path, refusing traversal and absolute input."""
        if not rel or "\x00" in rel or rel.startswith(("/", "\\")):
            raise InvalidInput(f"invalid path {safe_echo(rel, PATH_ECHO_LIMIT)!r}", field="path")
        candidate = Path(os.path.normpath(self.root / rel))
        if candidate == self.root or self.root not in candidate.parents:
            raise InvalidInput(
                f"path {safe_echo(rel, PATH_ECHO_LIMIT)!r} escapes store {self.name}", field="path"
            )
        return candidate

    def is_recall_file(self, path: Path) -> bool:
        """True for Markdown under knowledge/ (minus INDEX.md) or journal/."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return False
        parts = rel.parts
        if not parts or path.suffix.lower() != ".md" or any(p.startswith(".") for p in parts):
            return False
        if parts[0] == "knowledge":
            return rel.as_posix() != f"knowledge/{INDEX_MD}"
        return parts[0] == "journal" and len(parts) == 2

    def is_knowledge_file(self, path: Path) -> bool:
        """True for a recall file of the knowledge lane (what fact_count counts)."""
        return self.is_recall_file(path) and path.relative_to(self.root).parts[0] == "knowledge"


def is_recall_rel(rel: str) -> bool:
    """``StorePaths.is_recall_file`` for a store-relative POSIX path (no Path objects: hot path)."""
    if not rel.endswith(".md") or "/." in rel or rel.startswith("."):
        return False
    if rel.startswith("knowledge/"):
        return rel != f"knowledge/{INDEX_MD}"
    return rel.startswith("journal/") and rel.count("/") == 1


def lock_path(home: Path, store: str) -> Path:
    """The inter-process lock file of a store (outside the synced memory tree)."""
    return HomeLayout(home).store_lock(validate_store_name(store))

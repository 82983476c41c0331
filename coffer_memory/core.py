"""The core of MemoryService: plumbing, stores, facts, recall and maintenance."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import attrs

from .config import Settings
from .cursor import decode_cursor, encode_cursor
from .errors import InvalidInput, MemoryConflict, MemoryNotFound, MemoryRejected
from .index.db import IndexDB
from .index.reconcile import Reconciler
from .index.reindex import Reindexer
from .index.vec import VecIndex
from .models import (
    Actor,
    ClearResult,
    FactRecord,
    MemoryFact,
    MemoryScope,
    MutationResult,
    Page,
    RecallResult,
    ResolvedScope,
)
from .plugins.manager import get_embedder, get_grep_backend
from .retrieval import KnowledgeRetrieval
from .scope import find_git, project_id_for, require_git
from .store.files import (
    FactParseError,
    atomic_write,
    ensure_dir,
    fact_id_for,
    now_utc,
    parse_fact,
    read_bytes,
    remove_file,
    render_fact,
    scan_markdown,
    sha256_bytes,
)
from .store.lock import store_lock
from .store.paths import GLOBAL_STORE, MAX_SLUG_CHARS, StorePaths, lock_path, slugify, store_name_for_project
from .store.paths import project_id_of as _project_id_of

log = logging.getLogger("coffer_memory")
Scope = Literal["global", "project"]
MAX_LIST_LIMIT = 500
STALE_TEMP_SECONDS = 3600.0
MAX_TITLE_CHARS = 200
MAX_DESCRIPTION_CHARS = 500
_ULID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def _default_title(text: str) -> str:
    first = text.strip().splitlines()[0].strip().lstrip("#").strip()
    return first[:80].rstrip() or "memory"


def _default_description(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:199].rstrip() + "…"


def _next_suffix(folder: Path, slug: str) -> int:
    """The first ``-N`` suffix above every ``<slug>-N.md`` already in ``folder``."""
    pattern = re.compile(re.escape(slug) + r"-(\d+)\.md")
    taken = [int(m.group(1)) for name in os.listdir(folder) if (m := pattern.fullmatch(name))]
    return max(taken, default=1) + 1


def _follow_body(old: MemoryFact, new_body: str | None) -> str:
    """Keep a description the user wrote; re-derive one that was derived from the old body."""
    if new_body is not None and old.description == _default_description(old.body):
        return _default_description(new_body)
    return old.description


class ServiceCore:
    """Remember, recall, list, edit and delete facts in a coffer home.

    Thread-safe (one lock serialises use of the index connection); also a context manager.
    """

    def __init__(
        self, home: str | os.PathLike[str] | None = None, *, settings: Settings | None = None
    ) -> None:
        self.settings = settings if settings is not None else Settings.load(home)
        self.home = self.settings.home
        self._lock = threading.RLock()
        self._db: IndexDB | None = None
        self._side: KnowledgeRetrieval | None = None

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def db(self) -> IndexDB:
        """The index connection, opened (and migrated) on first use."""
        with self._lock:
            if self._db is None:
                db = IndexDB(self.settings.index_path, busy_timeout_ms=self.settings.busy_timeout_ms)
                vectors = self._vector_index(db)
                self._reindexer = Reindexer(
                    db,
                    self.settings.memory_dir,
                    vectors,
                    batch_size=self.settings.embedding.batch_size,
                    max_file_bytes=self.settings.memory.max_file_bytes,
                )
                self._reconciler = Reconciler(db, self._reindexer, self.settings, self._lock)
                self._retrieval = KnowledgeRetrieval(
                    db, self.settings, get_grep_backend(self.settings.grep_backend), vectors
                )
                self._retrieval.side = self._side_retrieval
                self._db = db
            return self._db

    def _side_retrieval(self) -> KnowledgeRetrieval | None:
        """A retrieval on a second, read-only-in-practice connection, so that recall searches a
        project store and the global store at the same time (None on a single CPU)."""
        if (os.cpu_count() or 1) < 2:
            return None
        if self._side is None:
            db = IndexDB(self.settings.index_path, busy_timeout_ms=self.settings.busy_timeout_ms)
            main = self._retrieval.vectors
            vectors = VecIndex(db, main.embedder, cache_tables=False) if main is not None else None
            self._side = KnowledgeRetrieval(db, self.settings, self._retrieval.grep, vectors)
        return self._side

    def _vector_index(self, db: IndexDB) -> VecIndex | None:
        """Vector support when a vector mode is enabled and an embedder and sqlite-vec are here."""
        if not {"vector", "hybrid"} & set(self.settings.memory.retrieval_modes):
            return None
        embedder = get_embedder(self.settings.embedding)
        if embedder is None or not embedder.available():
            log.warning("vector recall is enabled but no embedder is available: answering from keyword")
            return None
        if not db.vec_loaded:
            log.warning(
                "vector recall is enabled but sqlite-vec is not installed: pip install 'coffer-memory[vector]'"
            )
            return None
        return VecIndex(db, embedder)

    @property
    def retrieval(self) -> KnowledgeRetrieval:
        """The recall facade over this home's index."""
        _ = self.db
        return self._retrieval

    @property
    def reindexer(self) -> Reindexer:
        """The single re-index routine of this home."""
        _ = self.db
        return self._reindexer

    @property
    def reconciler(self) -> Reconciler:
        """The reconcile-on-read driver of this home."""
        _ = self.db
        return self._reconciler

    def close(self) -> None:
        """Close the index connection."""
        with self._lock:
            if self._db is not None:
                self._retrieval.close()
                if self._side is not None:
                    self._side.db.close()
                    self._side = None
                self._db.close()
                self._db = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        self.close()

    def paths(self, store: str) -> StorePaths:
        """The on-disk paths of a store (validates the name)."""
        return StorePaths.of(self.settings.memory_dir, store)

    def resolve_store(
        self, *, store: str | None = None, cwd: str | os.PathLike[str] | None = None, scope: Scope = "project"
    ) -> str:
        """A store name from an explicit ``store``, or from ``scope`` and ``cwd``."""
        if store is not None:
            return self.paths(store).name
        if scope == "global":
            return GLOBAL_STORE
        if scope != "project":
            raise InvalidInput(f"scope must be 'global' or 'project', not {scope!r}", field="scope")
        git = require_git(cwd if cwd is not None else os.getcwd())
        return store_name_for_project(project_id_for(git.toplevel))

    def resolve_scope(
        self, cwd: str | os.PathLike[str] | None = None, scope: Scope = "project"
    ) -> ResolvedScope:
        """The store a scope maps to from ``cwd``, with the project root and this worktree's branch."""
        if scope == "global":
            return ResolvedScope(
                scope=MemoryScope.GLOBAL,
                project_id=_project_id_of(GLOBAL_STORE),
                store_name=GLOBAL_STORE,
                store_dir=self.paths(GLOBAL_STORE).root,
            )
        if scope != "project":
            raise InvalidInput(f"scope must be 'global' or 'project', not {scope!r}", field="scope")
        git = require_git(cwd if cwd is not None else os.getcwd())
        project_id = project_id_for(git.toplevel)
        name = store_name_for_project(project_id)
        return ResolvedScope(
            scope=MemoryScope.PROJECT,
            project_id=project_id,
            store_name=name,
            store_dir=self.paths(name).root,
            project_root=git.toplevel,
            branch=git.branch,
        )

    def recall_stores(self, cwd: str | os.PathLike[str] | None = None) -> list[str]:
        """The stores recall searches from ``cwd``: the project's (inside a git repo), then global."""
        git = find_git(cwd if cwd is not None else os.getcwd())
        stores = [store_name_for_project(project_id_for(git.toplevel))] if git else []
        return [*stores, GLOBAL_STORE]

    @contextmanager
    def writing(self, store: str) -> Iterator[None]:
        """Hold this service's lock and the store's inter-process write lock."""
        with self._lock, store_lock(lock_path(self.home, store)):
            yield

    def _after_write(self, store: str) -> None:
        """Called after every memory write (the organizer re-arms its auto-organize timer here)."""

    def _record_project_root(self, store: str, root: Path) -> None:
        """Remember which checkout a project store came from (shown as its display name)."""
        self.db.conn.execute(
            "INSERT OR IGNORE INTO memory_store_project_roots (store_name, project_root) VALUES (?, ?)",
            (store, str(root)),
        )

    def _audit(self, event: str, store: str | None, document_id: str | None = None, **details: Any) -> None:
        self.db.conn.execute(
            "INSERT INTO audit_events (at, event, store, document_id, details) VALUES (?, ?, ?, ?, ?)",
            (now_utc().isoformat(), event, store, document_id, json.dumps(details, default=str)),
        )

    def audit_events(self, store: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The newest audit rows (optionally of one store), newest first."""
        with self._lock:
            where, params = ("WHERE store = ?", (store,)) if store else ("", ())
            rows = self.db.rows(
                f"SELECT at, event, store, document_id, details FROM audit_events {where} ORDER BY id DESC LIMIT ?",
                (*params, limit),
            )
        return [
            {"at": r[0], "event": r[1], "store": r[2], "document_id": r[3], "details": json.loads(r[4])}
            for r in rows
        ]

    def _validate_text(self, text: object) -> str:
        if not isinstance(text, str) or not text.strip():
            raise MemoryRejected("empty")
        limit = self.settings.memory.max_fact_chars
        if len(text.strip()) > limit:
            raise MemoryRejected("too_long", length=len(text.strip()), limit=limit)
        if "\x00" in text:
            raise InvalidInput("text contains a NUL character", field="text")
        return text.strip()

    @staticmethod
    def _check_field(value: str | None, name: str, limit: int) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string", field=name)
        flat = " ".join(value.split())
        if "\x00" in flat:
            raise InvalidInput(f"{name} contains a NUL character", field=name)
        if len(flat) > limit:
            raise InvalidInput(f"{name} is longer than {limit} characters", field=name)
        return flat

    def _reconcile(self, store: str) -> None:
        self.reconciler.reconcile(store)

    def _write(self, store: str, path: Path, data: bytes, *, create: bool) -> os.stat_result:
        """Write a fact file and index it, keeping the reconcile fast path warm."""
        ensure_dir(path.parent)
        before = os.stat(path.parent).st_mtime_ns
        atomic_write(path, data, overwrite=not create)
        after = os.stat(path.parent).st_mtime_ns
        st = os.stat(path)
        self.reindexer.index_file(store, path, data=data, st=st)
        if create:
            self.reconciler.note_write(store, path.parent, before, after, 1)
        return st

    # -- facts --------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        title: str | None = None,
        description: str | None = None,
        scope: Scope = "project",
        store: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        actor: Actor = "agent",
        origin_session_id: str | None = None,
    ) -> MutationResult:
        """Write a new fact to ``knowledge/inbox/<slug>.md`` of the store and index it."""
        body = self._validate_text(text)
        title = self._check_field(title, "title", MAX_TITLE_CHARS) or _default_title(body)
        description = self._check_field(description, "description", MAX_DESCRIPTION_CHARS)
        if actor not in ("agent", "user"):
            raise InvalidInput("actor must be 'agent' or 'user'", field="actor")
        root: Path | None = None
        if store is None and scope == "project":  # one git lookup gives the store and its root
            resolved = self.resolve_scope(cwd, "project")
            name, root = resolved.store_name, resolved.project_root
        else:
            name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        sp = self.paths(name)
        # No reconcile here: a write needs none, and the next read catches up with outside edits.
        with self.writing(name):
            if root is not None:
                self._record_project_root(name, root)
            stamp = now_utc()
            slug = slugify(title)
            suffixes = iter(range(2, 10**9))
            for attempt in range(1000):
                if attempt == 0:
                    candidate = slug
                else:  # keep "<slug>-N" within the slug length limit
                    tail = f"-{next(suffixes)}"
                    candidate = slug[: MAX_SLUG_CHARS - len(tail)].rstrip("-_") + tail
                path = sp.inbox_file(candidate)
                fact = MemoryFact(
                    id=fact_id_for(name, sp.relative(path), stamp),
                    title=title,
                    description=description or _default_description(body),
                    body=body,
                    actor=actor,
                    origin_session_id=origin_session_id,
                    created_at=stamp,
                    updated_at=stamp,
                )
                data = render_fact(fact)
                try:
                    self._write(name, path, data, create=True)
                except FileExistsError:
                    if attempt == 0:  # jump past the suffixes taken already, not one by one
                        suffixes = iter(range(_next_suffix(sp.inbox, slug), 10**9))
                    continue
                break
            else:  # pragma: no cover - a thousand racing writers with one title
                raise InvalidInput("too many facts share this title", field="title")
            self._audit("memory_added", name, fact.id, path=str(path), origin_session_id=origin_session_id)
        self._after_write(name)
        return MutationResult(
            fact=fact, store=name, path=path, before_sha256=None, after_sha256=sha256_bytes(data)
        )

    def recall(
        self,
        query: str,
        *,
        cwd: str | os.PathLike[str] | None = None,
        stores: Iterable[str] | None = None,
        mode: str | None = None,
        limit: int = 10,
    ) -> RecallResult:
        """Search the stores of ``cwd`` (project, then global) or the named ``stores``.

        Stores are fused by reciprocal rank fusion (k=60); each hit keeps its own score.
        """
        names = [self.paths(s).name for s in stores] if stores is not None else self.recall_stores(cwd)
        names = list(dict.fromkeys(names))
        with self._lock:
            self.retrieval.check(query, mode, limit)
            present = [n for n in names if self.paths(n).root.is_dir()]
            for name in present:
                self._reconcile(name)
            return self.retrieval.recall([self.paths(n) for n in names], query, mode, limit)

    def _record(self, store: str, path: Path) -> FactRecord:
        data, st = read_bytes(path)
        parsed = parse_fact(data, store=store, relpath=self.paths(store).relative(path), mtime=st.st_mtime)
        return FactRecord(fact=parsed.fact, store=store, path=path, sha256=parsed.sha256)

    def list_facts(
        self,
        *,
        store: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        scope: Scope = "project",
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[FactRecord]:
        """Facts of the knowledge lane, newest first, ``limit`` at a time with an opaque cursor."""
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIST_LIMIT}", field="limit")
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        after = decode_cursor(cursor, ("facts", name)) if cursor else None
        if after is not None and (len(after) != 2 or not all(isinstance(v, str) for v in after)):
            raise InvalidInput("cursor is malformed", field="cursor")
        sp = self.paths(name)
        if not sp.root.is_dir():
            return Page(items=(), next_cursor=None)
        with self._lock:
            self._reconcile(name)
            prefix = self.db.key(sp.knowledge) + "/"
            where = "resource_name = ? AND path >= ? AND path < ?"
            params: list[Any] = [name, prefix, prefix + "\U0010ffff"]
            if after:
                where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
                params += [after[0], after[0], after[1]]
            rows = self.db.rows(
                f"SELECT id, path, updated_at FROM documents WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?",
                (*params, limit + 1),
            )
        items = []
        for _doc_id, path, _ in rows[:limit]:
            try:
                items.append(self._record(name, self.db.file(path)))
            except (OSError, FactParseError):
                continue  # changed under us; the next reconcile fixes the index
        more = len(rows) > limit
        next_cursor = (
            encode_cursor(("facts", name), (rows[limit - 1][2], rows[limit - 1][0])) if more else None
        )
        return Page(items=tuple(items), next_cursor=next_cursor)

    def _find(self, name: str, fact_id: str) -> Path:
        if not isinstance(fact_id, str) or len(fact_id) != 26 or not set(fact_id) <= _ULID_CHARS:
            raise MemoryNotFound(name, str(fact_id))
        if not self.paths(name).root.is_dir():
            raise MemoryNotFound(name, fact_id)
        self._reconcile(name)
        path = self.db.scalar(
            "SELECT path FROM documents WHERE kind = 'memory' AND resource_name = ? AND id = ?",
            (name, fact_id),
        )
        if path is None or not self.paths(name).is_knowledge_file(self.db.file(path)):
            raise MemoryNotFound(name, fact_id)
        return self.db.file(path)

    def get_fact(
        self,
        fact_id: str,
        *,
        store: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        scope: Scope = "project",
    ) -> FactRecord:
        """One fact, read from its file, with its path and sha256."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        with self._lock:
            path = self._find(name, fact_id)
            try:
                return self._record(name, path)
            except (FileNotFoundError, FactParseError) as exc:
                raise MemoryNotFound(name, fact_id) from exc

    def edit_fact(
        self,
        fact_id: str,
        *,
        body: str | None = None,
        title: str | None = None,
        description: str | None = None,
        expected_sha256: str | None = None,
        store: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
    ) -> MutationResult:
        """Rewrite a fact (compare-and-swap on ``expected_sha256``) and re-index it."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        new_body = self._validate_text(body) if body is not None else None
        title = self._check_field(title, "title", MAX_TITLE_CHARS)
        description = self._check_field(description, "description", MAX_DESCRIPTION_CHARS)
        with self.writing(name):
            path = self._find(name, fact_id)
            data, st = read_bytes(path)
            before = sha256_bytes(data)
            if expected_sha256 is not None and expected_sha256 != before:
                raise MemoryConflict(name, fact_id, expected_sha256, before)
            parsed = parse_fact(data, store=name, relpath=self.paths(name).relative(path), mtime=st.st_mtime)
            old = parsed.fact
            fact = attrs.evolve(
                old,
                body=new_body if new_body is not None else old.body,
                title=title or old.title,
                description=description if description is not None else _follow_body(old, new_body),
                actor=actor,
                updated_at=now_utc(),
            )
            new_data = render_fact(fact, parsed.extra, with_created=parsed.has_created_at)
            self._write(name, path, new_data, create=False)
            after = sha256_bytes(new_data)
            self._audit(
                "memory_updated", name, fact.id, path=str(path), before_sha256=before, after_sha256=after
            )
        return MutationResult(fact=fact, store=name, path=path, before_sha256=before, after_sha256=after)

    def delete_fact(
        self,
        fact_id: str,
        *,
        expected_sha256: str | None = None,
        store: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        scope: Scope = "project",
    ) -> MutationResult:
        """Delete a fact file, then its index rows."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        with self.writing(name):
            path = self._find(name, fact_id)
            record = self._record(name, path)
            if expected_sha256 is not None and expected_sha256 != record.sha256:
                raise MemoryConflict(name, fact_id, expected_sha256, record.sha256)
            before = os.stat(path.parent).st_mtime_ns
            remove_file(path)
            self.reindexer.remove_path(name, path)
            self.reconciler.note_write(name, path.parent, before, os.stat(path.parent).st_mtime_ns, -1)
            self._audit("memory_deleted", name, fact_id, path=str(path), before_sha256=record.sha256)
        return MutationResult(
            fact=record.fact, store=name, path=path, before_sha256=record.sha256, after_sha256=None
        )

    def clear(
        self, *, store: str | None = None, cwd: str | os.PathLike[str] | None = None, scope: Scope = "project"
    ) -> ClearResult:
        """Delete every fact of the knowledge lane (the store and its other lanes stay)."""
        name = self.resolve_store(store=store, cwd=cwd, scope=scope)
        sp = self.paths(name)
        if not sp.root.is_dir():
            return ClearResult(store=name, deleted=0, paths=())
        removed: list[Path] = []
        with self.writing(name):
            files, _ = scan_markdown(sp.root, (sp.knowledge,))
            for rel in sorted(files):
                path = sp.root / rel
                remove_file(path)
                if sp.is_knowledge_file(path):
                    removed.append(path)
            with self.db.transaction():
                for path in removed:
                    self.reindexer.remove_path(name, path)
            self.reconciler.reconcile(name, full=True)
            self._audit("memory_cleared", name, None, deleted=len(removed))
        return ClearResult(store=name, deleted=len(removed), paths=tuple(removed))

"""``Facts``: remember, recall, list, get, edit, delete and clear facts of the knowledge lane.

A component of ``MemoryService``: built with the settings, the index handle, the Writer (every
write goes through one transaction) and the target resolver.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from ._config import MemoryStoreConfig, Settings
from ._cursor import decode_cursor, encode_cursor
from ._errors import CofferError, IndexUnavailable, InvalidInput, MemoryConflict, MemoryNotFound, check_limit
from ._fact_input import (
    WriteEvents,
    as_tag_list,
    check_actor,
    check_field,
    check_session_id,
    checked_tags,
    default_description,
    default_title,
    follow_body,
    next_suffix,
    validate_text,
)
from ._index.filters import FactFilter, TimeBound, check_tags
from ._index.values import DECODE_ERRORS, note_values, read_again
from ._indexing import IndexHandle
from ._models import (
    Actor,
    ClearResult,
    FactRecord,
    MemoryFact,
    MutationResult,
    Page,
    RecallResult,
    Target,
    WriteReceipt,
)
from ._store.files import FactParseError, fact_id_for, now_utc, parse_fact, read_bytes, render_fact
from ._store.looks import Looks
from ._store.paths import MAX_SLUG_CHARS, StorePaths, slugify
from ._store.scan import scan_markdown
from ._store.when import is_duration
from ._store.writer import Writer
from ._store_config import FACT_CHARS_CEILING, store_settings
from ._targets import PathLike, Targets, store_list
from .vocabulary import MAX_DESCRIPTION_CHARS, MAX_LIST_LIMIT, MAX_TITLE_CHARS, Scope

__all__ = [
    "Facts",
    "Scope",
    "WriteEvents",
    "check_actor",
    "check_field",
    "check_session_id",
    "validate_text",
]

_ULID_CHARS = frozenset("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
# How many times a recall brings its stores up to date and reads, when the index file changed
# under it (a schema another program changed, another process's repair between the two).
READ_ROUNDS = 3


class Facts:
    """The knowledge lane: facts as Markdown files under ``knowledge/``."""

    def __init__(
        self,
        settings: Settings,
        index: IndexHandle,
        writer: Writer,
        targets: Targets,
        events: WriteEvents,
    ) -> None:
        self.settings = settings
        self.index = index
        self.writer = writer
        self.targets = targets
        self.events = events

    def _validate(self, text: object, store: str | None = None) -> str:
        # Before the store is known: the highest limit any store may set; then the store's own.
        if store is None:
            return validate_text(text, FACT_CHARS_CEILING, any_store=True)
        return validate_text(text, self.store_settings(store).max_fact_chars)

    def store_settings(self, store: str) -> MemoryStoreConfig:
        """The configuration ``store`` runs with: the home's ``[memory]`` with the store's own keys over it."""
        return store_settings(self.settings.memory, self.targets.paths(store))

    def record(self, store: str, path: Path) -> FactRecord:
        """A fact file read and parsed, with its store, path and sha256."""
        data, st = read_bytes(path)
        sp = self.targets.paths(store)
        parsed = parse_fact(data, store=store, relpath=sp.relative(path), mtime=st.st_mtime)
        return FactRecord(fact=parsed.fact, store=store, path=path, sha256=parsed.sha256)

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
        """Write a new fact to ``knowledge/inbox/<slug>.md`` of the store and index it.

        ``tags`` are stored lowercased in the frontmatter (see ``vocabulary.MAX_TAGS``).
        """
        body = self._validate(text)
        tag_list = as_tag_list(tags)
        clean_tags = check_tags(tag_list)
        title = check_field(title, "title", MAX_TITLE_CHARS)
        description = check_field(description, "description", MAX_DESCRIPTION_CHARS)
        check_actor(actor)
        origin_session_id = check_session_id(origin_session_id)
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        name = target.store
        body = self._validate(body, name)
        findings: dict[str, int] = {}
        body = self.writer.check(body, "text", findings)
        title = self.writer.check(title, "title", findings) if title else default_title(body)
        description = self.writer.check(description, "description", findings) if description else None
        clean_tags = checked_tags(self.writer, findings, tag_list, clean_tags)
        if origin_session_id is not None:
            origin_session_id = self.writer.check(origin_session_id, "origin_session_id", findings)
        at = now_utc()
        draft = MemoryFact(
            id="",
            title=title,
            description=description or default_description(body),
            body=body,
            actor=actor,
            origin_session_id=origin_session_id,
            created_at=at,
            updated_at=at,
            tags=clean_tags,
        )
        # No reconcile here: a write needs none, and the next read catches up with outside edits.
        # Embedded before the lock (``embedding_ahead``): reads wait for it, not for the embedder.
        with self.index.embedding_ahead(name, lambda: [draft]), self.writer.transaction(name) as tx:
            tx.findings.update(findings)
            if target.project_root is not None and store is None:
                self.index.record_project_root(name, target.project_root)
                self.targets.record_checkout(tx, target)
            sp = tx.paths
            slug = slugify(title)
            same = self._same_fact(sp, slug, title, body, clean_tags)
            if same is not None:  # a retry of a write that landed: nothing new to write
                return MutationResult(
                    fact=same.fact,
                    store=name,
                    path=same.path,
                    before_sha256=same.sha256,
                    after_sha256=same.sha256,
                    target=target,
                    created=False,
                )
            stamp = now_utc()
            suffixes = iter(range(2, 10**9))
            for attempt in range(1000):
                if attempt == 0:
                    candidate = slug
                else:  # keep "<slug>-N" within the slug length limit
                    tail = f"-{next(suffixes)}"
                    candidate = slug[: MAX_SLUG_CHARS - len(tail)].rstrip("-_") + tail
                path = sp.inbox_file(candidate)
                fact = attrs.evolve(
                    draft, id=fact_id_for(name, sp.relative(path), stamp), created_at=stamp, updated_at=stamp
                )
                try:
                    receipt = tx.create(path, render_fact(fact))
                except FileExistsError:
                    if attempt == 0:  # jump past the suffixes taken already, not one by one
                        suffixes = iter(range(next_suffix(sp.inbox, slug), 10**9))
                    continue
                break
            else:  # pragma: no cover - a thousand racing writers with one title
                raise InvalidInput("too many facts share this title", field="title")
            tx.audit(
                "memory_added", fact.id, actor=actor, path=str(path), origin_session_id=origin_session_id
            )
        self.events.wrote(name)
        return MutationResult(
            fact=fact,
            store=name,
            path=path,
            before_sha256=None,
            after_sha256=receipt.after_sha256,
            target=target,
            receipt=receipt,
        )

    def _same_fact(
        self, sp: StorePaths, slug: str, title: str, body: str, tags: tuple[str, ...]
    ) -> FactRecord | None:
        """An inbox fact with this title, text and tags (``<slug>.md`` or ``<slug>-N.md``), if any."""
        if not os.path.lexists(sp.inbox / f"{slug}.md"):  # slug comes from slugify
            return None  # the common case: a new title, one stat
        pattern = re.compile(re.escape(slug) + r"(-\d+)?\.md")
        for name in sorted(os.listdir(sp.inbox)):
            if not pattern.fullmatch(name):
                continue
            try:
                record = self.record(sp.name, sp.inbox / name)
            except (OSError, FactParseError):
                continue
            if record.fact.title == title and record.fact.body.strip() == body and record.fact.tags == tags:
                return record
        return None

    def recall(
        self,
        query: str,
        *,
        cwd: PathLike | None = None,
        stores: Iterable[str] | None = None,
        mode: str | None = None,
        limit: int = 10,
        tags: Iterable[str] | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
    ) -> RecallResult:
        """Search the stores of ``cwd`` (project, then global) or the named ``stores``.

        Stores are fused by reciprocal rank fusion (k=60); each hit keeps its own score. Only facts
        carrying every one of ``tags`` and updated in ``[since, until)`` are searched.
        """
        where = FactFilter.of(tags, since, until)
        looks = Looks()  # each store folder and the index file looked at once (``_store/looks.py``)
        if stores is not None:
            targets = [self.targets.of_store(s) for s in store_list(stores)]
        else:
            targets = self.targets.recall(cwd, looks)
        unique: dict[str, Target] = {}
        for t in targets:
            unique.setdefault(t.store, t)
        targets = list(unique.values())
        paths = [self.targets.paths(t.store) for t in targets]
        # This thread's reader connection: the search (a grep scan too) runs without the lock.
        retrieval = self.index.retrieval
        own = self.store_settings(paths[0].name) if paths else self.settings.memory
        mode = retrieval.check(query, mode or own.default_mode, limit)
        if mode not in own.retrieval_modes:
            raise InvalidInput(
                f"mode {mode!r} is not enabled in store {paths[0].name} "
                f"(retrieval_modes = {own.retrieval_modes})",
                field="mode",
                enabled=list(own.retrieval_modes),
                store=paths[0].name,
                mode=mode,
            )
        # A hybrid recall's query embedding (most of its time) begins on the worker thread now,
        # beside the stores' reconcile below; the scan waits for their matrices. It begins only
        # once the arguments are checked: a refused recall embeds nothing.
        retrieval.begin(query, mode)
        try:
            for attempt in range(READ_ROUNDS):
                last = attempt == READ_ROUNDS - 1
                present = [sp for sp in paths if looks.is_dir(sp.name, sp.root)]
                try:
                    refreshed = [self.index.refresh(sp.name, looks) for sp in present]
                    # ``mode`` is checked above: the result is made once, with its targets.
                    result = retrieval.recall(
                        paths,
                        query,
                        mode,
                        limit,
                        where,
                        present=present,
                        checked=True,
                        targets=tuple(targets),
                        looks=looks,
                    )
                except IndexUnavailable as exc:
                    # A schema another program changed under this process (``db.schema_changed``):
                    # the refresh of the next round rebuilds the index from the files.
                    if last or exc.backend != "sqlite" or not self.index.db.needs_repair():
                        raise
                except DECODE_ERRORS:  # a value another program wrote into a row: rebuilt likewise
                    if last or note_values(retrieval.db) is None:
                        raise
                # Another process's repair replaced index.db between the refresh and the read: the
                # reader opened the new file, empty until a reconcile fills it, and the recall
                # answered nothing (tests/_index_race.py). The next round brings it up to date.
                else:
                    if last or not self.index.read_another_file(retrieval.db, refreshed):
                        return result
                looks = Looks()
            raise AssertionError("unreachable")  # pragma: no cover
        finally:  # an embedding the recall did not take up (a reconcile failed, say)
            retrieval.query_vectors.drop()

    @read_again
    def list_facts(
        self,
        *,
        store: str | None = None,
        cwd: PathLike | None = None,
        scope: Scope = "project",
        limit: int = 50,
        cursor: str | None = None,
        tags: Iterable[str] | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
    ) -> Page[FactRecord]:
        """Facts of the knowledge lane, newest first, ``limit`` at a time with an opaque cursor.

        ``tags`` (all must match), ``since`` and ``until`` (on ``updated_at``) filter inside the
        index query; a cursor is bound to its filter.
        """
        check_limit(limit, MAX_LIST_LIMIT)
        where_filter = FactFilter.of(tags, since, until)
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        name = target.store
        # A duration ago ("7d") is resolved on the first page and its bounds kept in the cursor, so
        # the pages are of one window; the cursor is bound to the filter as given.
        relative = is_duration(since) or is_duration(until)
        query: tuple[str, ...] = ("facts",)
        if where_filter is not None:
            query = ("facts", repr((where_filter.tags, since, until)) if relative else repr(where_filter))
        sp = self.targets.paths(name)
        if sp.root.is_dir():  # first: an outside edit it finds advances the version a cursor holds
            self.index.refresh(name)
        version = self.writer.version(name)
        home = self.settings.home
        after = decode_cursor(home, cursor, query, name, version) if cursor else None
        if after is not None and (
            len(after) != (4 if relative else 2)
            or not all(isinstance(v, str) for v in after[:2])
            or not all(v is None or isinstance(v, str) for v in after[2:])
        ):
            raise InvalidInput("cursor is malformed", field="cursor")
        if after is not None and relative and where_filter is not None:
            try:
                low, high = (datetime.fromisoformat(v) if v else None for v in after[2:])
            except ValueError:
                raise InvalidInput("cursor is malformed", field="cursor") from None
            where_filter = attrs.evolve(where_filter, since=low, until=high)
        if not sp.root.is_dir():
            return Page(items=(), next_cursor=None, target=target)
        db = self.index.reader_db
        prefix = db.key(sp.knowledge) + "/"
        where = "resource_name = ? AND path >= ? AND path < ?"
        params: list[Any] = [name, prefix, prefix + "\U0010ffff"]
        if where_filter is not None:
            clause, clause_params = where_filter.sql("d")
            where += " AND " + clause
            params += clause_params
        if after:
            where += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            params += [after[0], after[0], after[1]]
        rows = db.rows(
            f"SELECT id, path, updated_at FROM documents d WHERE {where} ORDER BY updated_at DESC, id DESC LIMIT ?",
            (*params, limit + 1),
        )
        items = []
        for _doc_id, path, _ in rows[:limit]:
            try:
                items.append(self.record(name, db.file(path)))
            except (OSError, FactParseError):
                continue  # changed under us; the next reconcile fixes the index
        more = len(rows) > limit
        next_cursor = None
        if more:
            position: tuple[str | None, ...] = (rows[limit - 1][2], rows[limit - 1][0])
            if relative and where_filter is not None:
                position += tuple(
                    b.isoformat() if b else None for b in (where_filter.since, where_filter.until)
                )
            next_cursor = encode_cursor(home, query, name, version, position)
        return Page(items=tuple(items), next_cursor=next_cursor, target=target)

    def _find(self, name: str, fact_id: str, *, reader: bool = False, refresh: bool = True) -> Path:
        """The file of a fact: on the writer connection (lock held), or on this thread's reader;
        ``refresh`` False: as the index stands (no reconcile, which takes the lock)."""
        if not isinstance(fact_id, str):  # a caller's mistake, not a fact that is missing
            raise InvalidInput(f"fact_id must be a string, not {type(fact_id).__name__}", field="fact_id")
        if len(fact_id) != 26 or not set(fact_id) <= _ULID_CHARS:
            raise MemoryNotFound(name, fact_id)
        sp = self.targets.paths(name)
        if not sp.root.is_dir():
            raise MemoryNotFound(name, fact_id)
        if refresh:
            self.index.refresh(name)
        db = self.index.reader_db if reader else self.index.db
        path = db.scalar(
            "SELECT path FROM documents WHERE kind = 'memory' AND resource_name = ? AND id = ?",
            (name, fact_id),
        )
        if path is None or not sp.is_knowledge_file(db.file(path)):
            raise MemoryNotFound(name, fact_id)
        return db.file(path)

    @read_again
    def session_facts(self, session_id: str, stores: Iterable[str]) -> list[FactRecord]:
        """The knowledge facts of ``stores`` remembered with ``origin_session_id`` ``session_id``,
        oldest first (by id: creation order)."""
        out: list[FactRecord] = []
        for name in stores:
            sp = self.targets.paths(name)
            if not sp.root.is_dir():
                continue
            self.index.refresh(name)
            db = self.index.reader_db
            prefix = db.key(sp.knowledge) + "/"
            rows = db.rows(
                "SELECT path FROM documents WHERE resource_name = ? AND origin_session = ? "
                "AND path >= ? AND path < ? ORDER BY id",
                (name, session_id, prefix, prefix + "\U0010ffff"),
            )
            for (path,) in rows:
                try:
                    out.append(self.record(name, db.file(path)))
                except (OSError, FactParseError):
                    continue  # changed under us; the next reconcile fixes the index
        return out

    @read_again
    def get_fact(
        self, fact_id: str, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> FactRecord:
        """One fact, read from its file, with its path and sha256."""
        name = self.targets.resolve(store=store, cwd=cwd, scope=scope).store
        path = self._find(name, fact_id, reader=True)
        try:
            return self.record(name, path)
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
        cwd: PathLike | None = None,
        scope: Scope = "project",
        actor: Actor = "user",
        tags: Iterable[str] | None = None,
    ) -> MutationResult:
        """Rewrite a fact (compare-and-swap on ``expected_sha256``) and re-index it.

        ``tags`` replaces the fact's tags (``[]`` removes them); ``None`` keeps them. An empty
        ``title`` or ``description`` is derived from the text again, as ``remember`` does; ``None``
        keeps it. An edit that changes nothing writes nothing: its ``before_sha256`` and
        ``after_sha256`` are the same.
        """
        tag_list = as_tag_list(tags) if tags is not None else None
        new_tags = check_tags(tag_list) if tag_list is not None else None
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        name = target.store
        new_body = self._validate(body, name) if body is not None else None
        title = check_field(title, "title", MAX_TITLE_CHARS)
        description = check_field(description, "description", MAX_DESCRIPTION_CHARS)
        findings: dict[str, int] = {}
        new_body = self.writer.check(new_body, "text", findings) if new_body is not None else None
        title = self.writer.check(title, "title", findings) if title else title
        description = self.writer.check(description, "description", findings) if description else description
        if new_tags is not None:
            new_tags = checked_tags(self.writer, findings, tag_list, new_tags)

        def edited(old: MemoryFact) -> MemoryFact:
            body = new_body if new_body is not None else old.body
            return attrs.evolve(
                old,
                body=body,
                # An empty title or description is derived from the text again, as remember does.
                title=old.title if title is None else title or default_title(body),
                description=follow_body(old, new_body)
                if description is None
                else description or default_description(body),
                actor=actor,
                updated_at=now_utc(),
                tags=new_tags if new_tags is not None else old.tags,
            )

        # The fact as it reads now, edited, is embedded before the lock (``embedding_ahead``); the
        # compare-and-swap is made under it, and a fact changed meanwhile is embedded as written.
        def planned() -> list[MemoryFact]:
            draft = self._draft(name, fact_id, edited, expected_sha256)
            return [draft] if draft is not None else []

        with self.index.embedding_ahead(name, planned, existing=fact_id), self.writer.transaction(name) as tx:
            tx.findings.update(findings)
            path = self._find(name, fact_id)
            data, st = read_bytes(path)
            parsed = parse_fact(data, store=name, relpath=tx.paths.relative(path), mtime=st.st_mtime)
            if expected_sha256 is not None and expected_sha256 != parsed.sha256:
                raise MemoryConflict(name, fact_id, expected_sha256, parsed.sha256)
            fact = edited(parsed.fact)
            receipt: WriteReceipt | None = None
            before: str | None = parsed.sha256
            after: str | None = parsed.sha256
            # Nothing to change (the same text, title, description and tags): the file
            # is not rewritten, and the result says so (before and after alike).
            if attrs.evolve(fact, actor=parsed.fact.actor, updated_at=parsed.fact.updated_at) == parsed.fact:
                fact = parsed.fact
            else:
                receipt = tx.write(path, render_fact(fact, parsed.extra, with_created=parsed.has_created_at))
                before, after = receipt.before_sha256, receipt.after_sha256
                tx.audit(
                    "memory_updated",
                    fact.id,
                    actor=actor,
                    path=str(path),
                    before_sha256=receipt.before_sha256,
                    after_sha256=receipt.after_sha256,
                )
        return MutationResult(
            fact=fact,
            store=name,
            path=path,
            before_sha256=before,
            after_sha256=after,
            target=target,
            receipt=receipt,
            created=False,
        )

    def _draft(
        self, name: str, fact_id: str, edited: Callable[[MemoryFact], MemoryFact], expected: str | None
    ) -> MemoryFact | None:
        """The fact ``fact_id`` as it reads now with an edit applied, to embed ahead; None when
        nothing is embedded here, it cannot be read or its sha is not ``expected`` (the edit under
        the lock says why). Read as the index stands: the lock is not taken for it."""
        try:
            record = self.record(name, self._find(name, fact_id, reader=True, refresh=False))
        except (CofferError, OSError, FactParseError):
            return None
        return edited(record.fact) if expected is None or expected == record.sha256 else None

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
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        name = target.store
        with self.writer.transaction(name) as tx:
            path = self._find(name, fact_id)
            record = self.record(name, path)
            if expected_sha256 is not None and expected_sha256 != record.sha256:
                raise MemoryConflict(name, fact_id, expected_sha256, record.sha256)
            receipt = tx.delete(path)
            tx.audit("memory_deleted", fact_id, path=str(path), before_sha256=receipt.before_sha256)
        return MutationResult(
            fact=record.fact,
            store=name,
            path=path,
            before_sha256=receipt.before_sha256,
            after_sha256=None,
            target=target,
            receipt=receipt,
            created=False,
        )

    def clear(
        self, *, store: str | None = None, cwd: PathLike | None = None, scope: Scope = "project"
    ) -> ClearResult:
        """Delete every fact of the knowledge lane (the store and its other lanes stay)."""
        target = self.targets.resolve(store=store, cwd=cwd, scope=scope)
        name = target.store
        sp = self.targets.paths(name)
        if not sp.root.is_dir():
            return ClearResult(store=name, deleted=0, paths=(), target=target)
        removed: list[Path] = []
        with self.writer.transaction(name) as tx:
            files, _ = scan_markdown(sp.root, (sp.knowledge,))
            for rel in sorted(files):
                path = sp.root / rel
                tx.delete(path)
                if sp.is_knowledge_file(path):
                    removed.append(path)
            tx.reconcile(full=True)
            tx.audit("memory_cleared", None, deleted=len(removed))
        return ClearResult(store=name, deleted=len(removed), paths=tuple(removed), target=target)

"""``Stores``: listing, labelling and deleting stores, and keeping their index healthy (reindex, doctor).

A project store's label and last known root are truth in its ``store.json``; ``index.db``
keeps a derived copy (still read for stores written before ``store.json`` existed).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

import apsw
import attrs

from ._config import Settings
from ._doctor import run_doctor
from ._errors import (
    PATH_ECHO_LIMIT,
    CofferError,
    IndexUnavailable,
    InvalidInput,
    MemoryStoreNotFound,
    StorageFull,
    StoreNotDeletable,
    StoreNotMergeable,
    safe_echo,
)
from ._index import segments
from ._index.tally import Progress
from ._index.values import note_values
from ._indexing import IndexHandle
from ._models import DoctorReport, ReindexReport, StoreInfo
from ._store.identity import (
    StoreIdentity,
    identity_path,
    project_identities,
    read_identity,
    remove_store_tree,
    same_repository_offers,
)
from ._store.paths import GLOBAL_STORE, StorePaths, scope_of, store_name_for_project
from ._store.paths import project_id_of as _project_id_of
from ._store.scan import stale_temp_files
from ._store.writer import Transaction, Writer
from ._store_config import STORE_KEYS, StoreConfig, effective_config, updated_settings
from ._store_merge import StoreMerge, merged_identity, move_lanes
from ._targets import PathLike, Targets
from .vocabulary import MAX_LABEL_CHARS

__all__ = ["Stores"]

# A well-formed name of no store: most often the offered merge run in another folder than the
# second clone whose store it names (that store is made by its first write, or by this merge).
_NOT_WRITTEN = (
    "no store of that name holds memory yet; a checkout's store is made by its first write, or by "
    "merging into it with `coffer stores merge` run inside the checkout (or given it with --cwd)"
)
_NO_CHECKOUT = (
    "no store of that name holds memory yet; to merge into the store of a checkout not yet written, "
    "name that checkout (cwd, an absolute path)"
)

log = logging.getLogger("coffer_memory")


class Stores:
    """Every store of a home: listing, labels, reindex, start-up sweep, doctor."""

    def __init__(self, settings: Settings, index: IndexHandle, writer: Writer, targets: Targets) -> None:
        self.settings = settings
        self.index = index
        self.writer = writer
        self.targets = targets

    def names(self) -> list[str]:
        """The name of every store that exists on disk (global first)."""
        names = []
        memory = self.settings.memory_dir
        if (memory / "global").is_dir():
            names.append(GLOBAL_STORE)
        projects = memory / "projects"
        if projects.is_dir():
            for entry in sorted(os.listdir(projects)):
                try:
                    names.append(store_name_for_project(entry))
                except Exception:
                    log.warning("ignoring %s: not a project store folder", projects / entry)
        return names

    def store_info(self, store: str) -> StoreInfo:
        """One store's identity, display metadata and fact count."""
        sp = self.targets.paths(store)
        name = sp.name
        count = 0
        if sp.root.is_dir():
            self.index.refresh(name)
        db = self.index.reader_db  # the last committed state, without the lock
        if sp.root.is_dir():
            prefix = db.key(sp.knowledge) + "/"
            count = int(
                db.scalar(
                    "SELECT count(*) FROM documents WHERE resource_name = ? AND path >= ? AND path < ?",
                    (name, prefix, prefix + "\U0010ffff"),
                )
                or 0
            )
        # Never read through a folder linked to another store's: its store.json is that store's.
        identity = read_identity(sp) if sp.linked_store() is None else None
        if identity is not None and name != GLOBAL_STORE:
            label, root = identity.label, identity.project_root
        else:
            # The global store's store.json (its settings) holds its label since session 26; one
            # set before lives in the index alone.
            label = identity.label if identity is not None else None
            if label is None:
                label = db.scalar("SELECT label FROM memory_store_labels WHERE store_name = ?", (name,))
            root = db.scalar(
                "SELECT project_root FROM memory_store_project_roots WHERE store_name = ?", (name,)
            )
        return StoreInfo(
            name=name,
            scope=scope_of(name),
            project_id=_project_id_of(name),
            store_dir=sp.root,
            fact_count=count,
            label=label,
            project_root=root,
        )

    def stores(self) -> list[StoreInfo]:
        """Every store that exists on disk."""
        return [self.store_info(n) for n in self.names()]

    def set_label(self, store: str, label: str) -> StoreInfo:
        """Set a store's display label (the store name never changes)."""
        name = self.targets.paths(store).name
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS:
            raise InvalidInput(f"label must be 1 to {MAX_LABEL_CHARS} characters", field="label")
        if any(ord(c) < 32 for c in label):
            raise InvalidInput("label must not contain control characters", field="label")
        shape = label.strip().casefold()
        if shape == GLOBAL_STORE or (shape.startswith("project-") and len(shape) == len("project-") + 26):
            # `--store global` names the global store whatever the labels say: such a label could
            # never be used, and a `clear --store global` meant for this store would hit that one.
            raise InvalidInput(
                f"label {label.strip()!r} looks like a store name; choose another", field="label"
            )
        label = label.strip()
        findings: dict[str, int] = {}
        for check in self.writer.checks:  # a label is shown everywhere: a token typed in is redacted too
            label = check(label, "label", findings)
        with self.index.lock:
            self._write_label(name, label)
            self.index.db.conn.execute(
                "INSERT INTO memory_store_labels (store_name, label) VALUES (?, ?) "
                "ON CONFLICT(store_name) DO UPDATE SET label = excluded.label",
                (name, label),
            )
        return self.store_info(name)

    def clear_label(self, store: str) -> StoreInfo:
        """Remove a store's label; the display name falls back to the project root's basename."""
        name = self.targets.paths(store).name
        with self.index.lock:
            self._write_label(name, None)
            self.index.db.conn.execute("DELETE FROM memory_store_labels WHERE store_name = ?", (name,))
        return self.store_info(name)

    def _write_label(self, name: str, label: str | None) -> None:
        """The label is truth in the store's ``store.json``, so deleting ``index.db`` keeps it."""
        sp = self.targets.paths(name)
        if not sp.root.is_dir():
            return
        with self.writer.transaction(name) as tx:
            identity = read_identity(sp) or StoreIdentity()
            if identity.label != label:
                tx.write(identity_path(sp), attrs.evolve(identity, label=label).to_bytes())

    def delete_store(self, store: str) -> StoreInfo:
        """Delete a project store: its folder (never through a link), index rows, label and root; audited.

        Returns the store as it was. The global store cannot be deleted (``StoreNotDeletable``);
        a store that is neither on disk nor in the index is ``MemoryStoreNotFound``.
        """
        name = self.targets.paths(store).name
        if name == GLOBAL_STORE:
            raise StoreNotDeletable(name)
        before = self.store_info(name)
        sp = self.targets.paths(name)
        with self.index.lock:
            known = self.index.db.scalar(
                "SELECT count(*) FROM documents WHERE resource_name = ?", (name,)
            ) or self.index.db.scalar(
                "SELECT count(*) FROM memory_store_project_roots WHERE store_name = ?", (name,)
            )
            if not (sp.root.is_dir() or sp.root.is_symlink() or known):
                raise MemoryStoreNotFound(name)
            self._retire(name, "store_deleted")
        return before

    def _retire(self, name: str, event: str, **details: object) -> None:
        """Remove a store's folder, index rows, label and root; audit ``event``; advance its version."""
        sp = self.targets.paths(name)
        with self.writer.transaction(name) as tx:
            tx.fence()
            removed = remove_store_tree(sp.root)
            self.index.reindexer.remove_store(name)
            for table in ("memory_store_labels", "memory_store_project_roots"):
                self.index.db.conn.execute(f"DELETE FROM {table} WHERE store_name = ?", (name,))
            tx.audit(event, None, files=removed, store_dir=str(sp.root), **details)
        self.writer.bump(name)  # cursors of a retired store never page into a recreated one

    # -- merge --------------------------------------------------------------------------------
    def merge(
        self,
        source: str,
        into: str,
        *,
        dry_run: bool = False,
        cwd: PathLike | None = None,
        checkout: bool = True,
    ) -> StoreMerge:
        """Merge project store ``source`` into ``into`` and retire ``source`` (the seed's consolidate).

        Lane files move into ``into`` add-only (``store_merge`` says how same-name files and
        journal days are handled); ``source``'s ULID and merged identities join ``into``'s
        ``merged_identities``, so a checkout that resolved to ``source`` now lands in ``into``;
        then ``source``'s folder, index rows, label and root are removed. Audited ``store_merged``
        in both stores. Idempotent: run again, it reports ``already_merged`` and writes nothing.
        ``dry_run`` reports what would happen and writes nothing.

        ``into`` need not exist yet when it is the store of the checkout at ``cwd`` (default: the
        current directory): a second clone or a copy of a checkout has no store until its first
        write, and merging its original's memory there is what the offer in its session context
        proposes. Any other missing ``into`` is ``MemoryStoreNotFound`` (a mistyped name must not
        become a store nobody's checkout reaches). ``checkout=False`` says the caller has no working
        directory (a server's client that named none): a missing ``into`` is then not found, never
        the store of whatever directory the process itself runs in.
        """
        src, dst = self.targets.paths(source), self.targets.paths(into)
        if src.name == dst.name:
            raise StoreNotMergeable(src.name, dst.name, "same_store", f"{src.name} cannot merge into itself")
        if GLOBAL_STORE in (src.name, dst.name):
            raise StoreNotMergeable(
                src.name, dst.name, "global", "only project stores merge; the global store is never merged"
            )
        for sp in (src, dst):
            if sp.root.is_symlink():
                raise StoreNotMergeable(
                    src.name, dst.name, "link", f"{sp.root} is a symbolic link; coffer never follows one"
                )
        root = None
        if not dst.root.is_dir():
            if not checkout:
                raise MemoryStoreNotFound(dst.name, _NO_CHECKOUT)
            if cwd is not None and not os.path.isdir(cwd):  # as recall --cwd says; a file is none
                shown = safe_echo(os.fspath(cwd), PATH_ECHO_LIMIT)
                raise InvalidInput(f"cwd is not a directory: {shown!r}", field="cwd")
            here = [t for t in self.targets.find_project(cwd) if t.store == dst.name]
            if not here or here[0].project_root is None:
                raise MemoryStoreNotFound(dst.name, _NOT_WRITTEN)  # the name is well formed (paths)
            root = str(here[0].project_root)
        if not src.root.is_dir():
            return self._merged_before(src, dst, dry_run=dry_run)
        if dry_run:
            with self.writer.transaction(dst.name, dry_run=True) as tx:
                return self._fold(tx, src, root)
        first, second = sorted((src.name, dst.name))  # one lock order: two merges never deadlock
        with self.writer.locked(first), self.writer.locked(second):
            if not src.root.is_dir():  # another process merged it while this one waited: where?
                return self._merged_before(src, dst, dry_run=False)
            # The moved files are embedded after the locks (``embed_later`` below), not under them.
            with self.index.reindexer.holding(), self.writer.transaction(dst.name) as tx:
                done = self._fold(tx, src, root)
                tx.audit(
                    "store_merged",
                    None,
                    source=src.name,
                    moved=len(done.moved),
                    siblings=len(done.siblings),
                    journal_entries=done.journal_entries,
                )
            self._retire(src.name, "store_merged", into=dst.name)
        self.index.embed_later(dst.name)
        return attrs.evolve(done, retired=True)

    def _merged_before(self, src: StorePaths, dst: StorePaths, *, dry_run: bool) -> StoreMerge:
        """The answer for a ``src`` with no folder: ``already_merged`` when it went into ``dst``;
        else ``MemoryStoreNotFound`` saying where it went (``_gone``). Asked again under the locks:
        a merge that waited on them while another moved ``src`` into another store answered
        "merged into ``dst`` already", and ``dst`` held nothing of it."""
        identity = read_identity(dst) or StoreIdentity()
        if _project_id_of(src.name) in identity.merged_identities:
            return StoreMerge(source=src.name, into=dst.name, dry_run=dry_run, already_merged=True)
        raise MemoryStoreNotFound(src.name, self._gone(src.name, dst.name))

    def _gone(self, source: str, into: str) -> str:
        """Why a well-formed ``source`` names no store: most often an offer gone stale (two clones
        were offered one store and the other clone merged it first): say where it went."""
        project_id = _project_id_of(source)
        for store, identity in project_identities(self.settings.memory_dir).items():
            if project_id in identity.merged_identities and store != into:
                return (
                    f"it was merged into {store} already; to merge that one into {into}: "
                    f"coffer stores merge {store} {into}"
                )
        return "no store of that name exists (`coffer stores list` lists them)"

    def _fold(self, tx: Transaction, src: StorePaths, root: str | None = None) -> StoreMerge:
        """Move the lane files and fold the source's identity into the destination's ``store.json``
        (``root``: the checkout of a destination made by this merge)."""
        done = move_lanes(tx, src)
        old = read_identity(tx.paths) or StoreIdentity()
        source = read_identity(src)
        new = merged_identity(old, source, _project_id_of(src.name))
        if root is not None and new.project_root is None:
            # A store made by this merge has no settings of its own: it takes the source's, as
            # it takes its label (they were dropped, a merge into an existing store keeps DST's).
            config = new.config or (source.config if source is not None else {})
            new = attrs.evolve(new, project_root=root, config=dict(config))
        if new != old:
            tx.write(identity_path(tx.paths), new.to_bytes())
        return attrs.evolve(done, identity_changed=new != old, receipts=tuple(tx.receipts))

    # -- per-store configuration ----------------------------------------------------------------
    def config(self, store: str) -> StoreConfig:
        """A store's configuration as it runs: the home's ``[memory]`` with the store's own keys over it."""
        sp = self.targets.paths(store)
        identity = read_identity(sp) or StoreIdentity()
        return StoreConfig(
            store=sp.name,
            config=effective_config(self.settings.memory, identity),
            overrides={k: identity.config[k] for k in sorted(identity.config) if k in STORE_KEYS},
            path=identity_path(sp),
        )

    def set_config(self, store: str, changes: Mapping[str, Any]) -> StoreConfig:
        """Change a store's own settings (a JSON merge patch: ``None`` removes a key); kept in ``store.json``.

        The seed's legacy flat embedding keys are accepted and ignored (listed in ``ignored``).
        A project store must exist (``MemoryStoreNotFound``); the global store's file is made on
        first use. Audited ``store_configured`` when something changed.
        """
        sp = self.targets.paths(store)
        if sp.name != GLOBAL_STORE and not sp.root.is_dir():
            raise MemoryStoreNotFound(sp.name)
        with self.writer.transaction(sp.name) as tx:
            identity = read_identity(sp) or StoreIdentity()
            overrides, ignored = updated_settings(self.settings.memory, identity, changes)
            changed = overrides != {k: v for k, v in identity.config.items() if k in STORE_KEYS}
            if changed:
                kept = {k: v for k, v in identity.config.items() if k not in STORE_KEYS}
                tx.write(identity_path(sp), attrs.evolve(identity, config={**kept, **overrides}).to_bytes())
                tx.audit("store_configured", None, keys=sorted(changes))
        return attrs.evolve(self.config(sp.name), ignored=ignored, changed=changed)

    def reindex(
        self,
        store: str | None = None,
        *,
        rebuild: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> list[ReindexReport]:
        """Full reconcile of one store or all; ``rebuild`` drops the store's index rows first.

        Also removes temp files that writers killed mid-write left behind, in every lane
        (``stale_temp_files``: the writer's pid is gone, or older than ten minutes), and merges
        the word index that single writes left in several FTS5 segments into one.
        """
        names = [self.targets.paths(store).name] if store else self.names()
        reports = []
        with self.index.lock:
            for name in names:
                sp = self.targets.paths(name)
                with self.writer.transaction(name) as tx:
                    for junk in stale_temp_files((sp.root,)):
                        tx.discard_temp(junk)
                step: Progress | None = None
                if progress is not None:

                    def step(done: int, total: int, _name: str = name) -> None:
                        progress(_name, done, total)

                reconciler = self.index.reconciler
                try:
                    reports.append(
                        reconciler.rebuild(name, progress=step)
                        if rebuild
                        else reconciler.reconcile(name, full=True, progress=step)
                    )
                except apsw.FullError as exc:  # rolled back: the store's rows are as they were
                    raise StorageFull(str(self.index.index_path), str(exc)) from None
            segments.settle(self.index.db, most=1)
        # Embedded after the lock (``IndexHandle.embed_later``): writes and reads of other threads
        # and processes go on while the embedder runs, as they wait for the scan alone.
        for name in names:
            self.index.embed_later(name, functools.partial(progress, name) if progress is not None else None)
        return reports

    def startup_sweep(self) -> list[ReindexReport]:
        """Reconcile every store once (what servers run at start-up).

        Picks up what was written but never indexed, e.g. journal files appended while
        nothing read their store, and retries pending embeddings. Failures are logged: a typed
        one (the shared index down or misconfigured) as its one line, which every request
        answers too; anything else with its traceback (a bug).
        """
        reports = []
        for name in self.names():
            try:
                with self.index.lock:
                    reports.append(self.index.reconciler.reconcile(name))
                self.index.embed_later(name)
            except CofferError as exc:
                log.warning("start-up sweep of %s skipped: %s: %s", name, exc.code, exc.message)
            except Exception:
                log.exception("start-up sweep of %s failed", name)
        return reports

    def doctor(self, *, progress: Callable[[str, int, int], None] | None = None) -> DoctorReport:
        """Compare the index with the files, list broken files, say which grep backend runs.

        The stores are reconciled first as a read would, with ``progress`` on what that indexes.
        An index whose schema another program changed is rebuilt by that reconcile (and listed),
        as is one whose rows clash with the files (``_index/values.clash``, met by the reconcile).
        """
        try:
            return self._doctor(progress)
        except IndexUnavailable as exc:
            if exc.backend != "sqlite" or not self.index.db.needs_repair():
                raise
        return self._doctor(progress)

    def _doctor(self, progress: Callable[[str, int, int], None] | None) -> DoctorReport:
        with self.index.lock:  # checked once at open; a long-lived process may have met none since
            self.index.db.note_schema() or note_values(self.index.db)
        if progress is not None:
            for name in self.names():
                try:
                    with self.index.lock:
                        self.index.reconciler.reconcile(name, progress=functools.partial(progress, name))
                except (apsw.FullError, apsw.IOError):
                    # No room to index: the read below tries again and says why (a warning), and
                    # the report lists what the index lacks, as for any read.
                    continue
                self.index.embed_later(name, functools.partial(progress, name))
        with self.index.lock:
            infos = self.stores()
            report = run_doctor(
                self.settings.home, self.index, [self.targets.paths(i.name) for i in infos], infos
            )
        offers = tuple(same_repository_offers(self.settings.memory_dir))
        return attrs.evolve(report, same_repository=offers)

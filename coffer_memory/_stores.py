"""``Stores``: listing, labelling and deleting stores, and keeping their index healthy (reindex, doctor).

A project store's label and last known root are truth in its ``store.json``; ``index.db``
keeps a derived copy (still read for stores written before ``store.json`` existed).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import attrs

from ._config import Settings
from ._doctor import run_doctor
from ._errors import InvalidInput, MemoryStoreNotFound, StoreNotDeletable
from ._index.reconcile import Progress
from ._indexing import IndexHandle
from ._models import DoctorReport, ReindexReport, StoreInfo
from ._store.files import stale_temp_files
from ._store.identity import (
    StoreIdentity,
    identity_path,
    read_identity,
    remove_store_tree,
    same_repository_offers,
)
from ._store.paths import GLOBAL_STORE, scope_of, store_name_for_project
from ._store.paths import project_id_of as _project_id_of
from ._store.writer import Writer
from ._targets import Targets
from .vocabulary import MAX_LABEL_CHARS

__all__ = ["Stores"]

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
        identity = read_identity(sp) if name != GLOBAL_STORE else None
        if identity is not None:
            label, root = identity.label, identity.project_root
        else:
            label = db.scalar("SELECT label FROM memory_store_labels WHERE store_name = ?", (name,))
            root = db.scalar("SELECT project_root FROM memory_store_project_roots WHERE store_name = ?", (name,))
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
        with self.index.lock:
            self._write_label(name, label.strip())
            self.index.db.conn.execute(
                "INSERT INTO memory_store_labels (store_name, label) VALUES (?, ?) "
                "ON CONFLICT(store_name) DO UPDATE SET label = excluded.label",
                (name, label.strip()),
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
        """The label is truth in a project store's ``store.json`` (global has no such file)."""
        sp = self.targets.paths(name)
        if name == GLOBAL_STORE or not sp.root.is_dir():
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
            with self.writer.transaction(name) as tx:
                removed = remove_store_tree(sp.root)
                self.index.reindexer.remove_store(name)
                for table in ("memory_store_labels", "memory_store_project_roots"):
                    self.index.db.conn.execute(f"DELETE FROM {table} WHERE store_name = ?", (name,))
                tx.audit("store_deleted", None, files=removed, store_dir=str(sp.root))
            self.writer.bump(name)  # cursors of the deleted store never page into a recreated one
        return before

    def reindex(
        self,
        store: str | None = None,
        *,
        rebuild: bool = False,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> list[ReindexReport]:
        """Full reconcile of one store or all; ``rebuild`` drops the store's index rows first.

        Also removes temp files that writers killed mid-write left behind, in every lane
        (``stale_temp_files``: the writer's pid is gone, or older than ten minutes).
        """
        names = [self.targets.paths(store).name] if store else self.names()
        reports = []
        with self.index.lock:
            for name in names:
                sp = self.targets.paths(name)
                with self.writer.transaction(name) as tx:
                    for junk in stale_temp_files((sp.root,)):
                        tx.discard_temp(junk)
                if rebuild:
                    self.index.reindexer.remove_store(name)
                step: Progress | None = None
                if progress is not None:

                    def step(done: int, total: int, _name: str = name) -> None:
                        progress(_name, done, total)

                reports.append(self.index.reconciler.reconcile(name, full=True, progress=step))
        return reports

    def startup_sweep(self) -> list[ReindexReport]:
        """Reconcile every store once (what servers run at start-up).

        Picks up what was written but never indexed, e.g. journal files appended while
        nothing read their store, and retries pending embeddings. Failures are logged.
        """
        reports = []
        for name in self.names():
            try:
                with self.index.lock:
                    reports.append(self.index.reconciler.reconcile(name))
            except Exception:
                log.exception("start-up sweep of %s failed", name)
        return reports

    def doctor(self) -> DoctorReport:
        """Compare the index with the files, list broken files, say which grep backend runs."""
        with self.index.lock:
            infos = self.stores()
            report = run_doctor(
                self.settings.home, self.index, [self.targets.paths(i.name) for i in infos], infos
            )
        offers = tuple(same_repository_offers(self.settings.memory_dir))
        return attrs.evolve(report, same_repository=offers)

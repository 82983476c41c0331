"""``Stores``: listing stores, labelling them, and keeping their index healthy (reindex, doctor)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from .config import Settings
from .doctor import run_doctor
from .errors import InvalidInput
from .index.reconcile import Progress
from .indexing import IndexHandle
from .models import DoctorReport, ReindexReport, StoreInfo
from .store.files import stale_temp_files
from .store.paths import GLOBAL_STORE, scope_of, store_name_for_project
from .store.paths import project_id_of as _project_id_of
from .store.writer import Writer
from .targets import Targets
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
            self.index.db.conn.execute("DELETE FROM memory_store_labels WHERE store_name = ?", (name,))
        return self.store_info(name)

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
            return run_doctor(
                self.settings.home, self.index, [self.targets.paths(i.name) for i in infos], infos
            )

"""Store-level methods of MemoryService: listing, labels, reindex, doctor."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from .core import ServiceCore
from .errors import InvalidInput
from .index.reconcile import Progress
from .models import DoctorReport, ReindexReport, StoreInfo
from .store.files import stale_temp_files
from .store.lock import store_lock
from .store.paths import GLOBAL_STORE, lock_path, scope_of, store_name_for_project
from .store.paths import project_id_of as _project_id_of

log = logging.getLogger("coffer_memory")
MAX_LABEL_CHARS = 200


class StoresMixin(ServiceCore):
    """Listing stores, labelling them, and keeping their index healthy."""

    # -- stores -------------------------------------------------------------------------------
    def _store_names(self) -> list[str]:
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
        name = self.paths(store).name
        sp = self.paths(name)
        with self._lock:
            count = 0
            if sp.root.is_dir():
                self._reconcile(name)
                prefix = self.db.key(sp.knowledge) + "/"
                count = int(
                    self.db.scalar(
                        "SELECT count(*) FROM documents WHERE resource_name = ? AND path >= ? AND path < ?",
                        (name, prefix, prefix + "\U0010ffff"),
                    )
                    or 0
                )
            label = self.db.scalar("SELECT label FROM memory_store_labels WHERE store_name = ?", (name,))
            root = self.db.scalar(
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
        return [self.store_info(n) for n in self._store_names()]

    def set_label(self, store: str, label: str) -> StoreInfo:
        """Set a store's display label (the store name never changes)."""
        name = self.paths(store).name
        if not isinstance(label, str) or not label.strip() or len(label) > MAX_LABEL_CHARS:
            raise InvalidInput(f"label must be 1 to {MAX_LABEL_CHARS} characters", field="label")
        if any(ord(c) < 32 for c in label):
            raise InvalidInput("label must not contain control characters", field="label")
        with self._lock:
            self.db.conn.execute(
                "INSERT INTO memory_store_labels (store_name, label) VALUES (?, ?) "
                "ON CONFLICT(store_name) DO UPDATE SET label = excluded.label",
                (name, label.strip()),
            )
        return self.store_info(name)

    def clear_label(self, store: str) -> StoreInfo:
        """Remove a store's label; the display name falls back to the project root's basename."""
        name = self.paths(store).name
        with self._lock:
            self.db.conn.execute("DELETE FROM memory_store_labels WHERE store_name = ?", (name,))
        return self.store_info(name)

    # -- maintenance --------------------------------------------------------------------------
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
        names = [self.paths(store).name] if store else self._store_names()
        reports = []
        with self._lock:
            for name in names:
                sp = self.paths(name)
                with store_lock(lock_path(self.home, name)):
                    for junk in stale_temp_files((sp.root,)):
                        junk.unlink(missing_ok=True)
                if rebuild:
                    self.reindexer.remove_store(name)
                step: Progress | None = None
                if progress is not None:

                    def step(done: int, total: int, _name: str = name) -> None:
                        progress(_name, done, total)

                reports.append(self.reconciler.reconcile(name, full=True, progress=step))
        return reports

    def startup_sweep(self) -> list[ReindexReport]:
        """Reconcile every store once (what servers run at start-up).

        Picks up what was written but never indexed, e.g. journal files appended while
        nothing read their store, and retries pending embeddings. Failures are logged.
        """
        reports = []
        for name in self._store_names():
            try:
                with self._lock:
                    reports.append(self.reconciler.reconcile(name))
            except Exception:
                log.exception("start-up sweep of %s failed", name)
        return reports

    def doctor(self) -> DoctorReport:
        """Compare the index with the files, list broken files, say which grep backend runs."""
        from .doctor import run_doctor

        with self._lock:
            return run_doctor(self)

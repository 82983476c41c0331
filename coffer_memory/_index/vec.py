"""Vector rows: one sqlite-vec ``vec0`` table per store, cosine distance, created lazily.

The table for a store is ``vec_chunks_<store-scope>``; ``vec_stores`` records the model id
and width it was built with. A different model or width drops the table and marks every
document of the store for re-indexing (the files are the truth).

Unfiltered nearest-neighbour search reads a store's vectors once into a numpy matrix and
answers with one dot product (vec0's own scan took 6-14 ms at 5k vectors, the product well
under 1 ms). Every change to a store's vectors sets a new random token in ``kv``
(``vec_version:<store>``); a search whose token differs from the matrix's reads it again, so
another process's writes are seen on the next search.
"""

from __future__ import annotations

import array
import logging
import math
import secrets
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._errors import EmbeddingUnavailable
from .chunking import MAX_WINDOWS
from .db import IndexDB
from .keys import store_scope
from .shadows import VEC_TABLE

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from ..plugins.hookspecs import Embedder, Vector

log = logging.getLogger("coffer_memory.vec")
PAUSE_KEY = "embedding_paused_until"
# After a failure the embedder is left alone this long, so a dead provider cannot stall
# every read with timeouts and retries; keyword answers (fallback=True) meanwhile.
PAUSE_SECONDS = 60.0
VERSION_KEY = "vec_version:"
# Stores with more vector floats than this (128 MB of float32) are searched by vec0's scan
# instead of an in-memory matrix.
MAX_MATRIX_FLOATS = 32_000_000


class Matrix:
    """One store's vectors in memory: bare chunk ids, unit rows, the token they were read at."""

    def __init__(self, token: str | None, ids: list[str], unit: Any) -> None:
        self.token = token
        self.ids = ids
        self.unit = unit


# Process-wide (every reader connection of a home shares them): (index path, table) -> matrix.
_matrices: dict[tuple[str, str], Matrix] = {}
_matrices_guard = threading.Lock()


def to_blob(vector: Vector) -> bytes:
    """A float32 little-endian blob, what vec0 stores."""
    tobytes = getattr(vector, "tobytes", None)
    if tobytes is not None and getattr(vector, "dtype", None) is not None and str(vector.dtype) == "float32":  # type: ignore[attr-defined]
        return bytes(tobytes())
    return array.array("f", (float(x) for x in vector)).tobytes()


def embedded(embedder: Embedder, texts: Sequence[str]) -> Sequence[Vector]:
    """``embedder.embed_batch(texts)``, refused (``EmbeddingUnavailable`` naming the model) unless
    it holds one row per text: a plugin's None or short list failed later with a bare
    ``TypeError`` or ``IndexError`` that named no embedder."""
    got = embedder.embed_batch(texts)
    try:
        count = len(got)
    except TypeError:
        raise EmbeddingUnavailable(
            f"embedder {embedder.model_id} returned {type(got).__name__} from embed_batch, not a list of vectors"
        ) from None
    if count != len(texts):
        raise EmbeddingUnavailable(
            f"embedder {embedder.model_id} returned {count} vectors for {len(texts)} texts"
        )
    return got


def failure_text(embedder: Embedder, exc: Exception) -> str:
    """An embedding failure as a log line says it: a plugin's own exception with its type and
    the model that raised it (``my model crashed`` alone named neither)."""
    if isinstance(exc, EmbeddingUnavailable) and embedder.model_id in str(exc):
        return str(exc)
    return f"embedder {embedder.model_id}: {type(exc).__name__}: {' '.join(str(exc).split())}"


def checked_width(vector: Vector, embedder: Embedder, what: str = "a vector") -> None:
    """Refuse a row that is not a sequence of ``embedder.dimensions`` values: a query vector of
    another width failed the vector search with numpy's broadcast error."""
    try:
        width = len(vector)
    except TypeError:
        raise EmbeddingUnavailable(
            f"embedder {embedder.model_id} returned {type(vector).__name__} as {what}, not a sequence of floats"
        ) from None
    if width != embedder.dimensions:
        raise EmbeddingUnavailable(
            f"embedder {embedder.model_id} returned {what} of {width} dimensions, expected {embedder.dimensions}"
        )


def finite_blob(vector: Vector, model_id: str) -> bytes:
    """``to_blob``, refusing a vector holding NaN or infinity (a plugin normalising an all-zero row
    divides by zero): stored, it made every score of the store NaN, which JSON cannot carry.
    The sum is NaN or infinite exactly when an element is (float32 values cannot overflow it)."""
    try:
        blob = to_blob(vector)
    except (TypeError, ValueError) as exc:  # strings, None: "could not convert string to float"
        raise EmbeddingUnavailable(
            f"embedder {model_id} returned a vector that is not all floats: {exc}"
        ) from None
    if not math.isfinite(sum(array.array("f", blob))):
        raise EmbeddingUnavailable(f"embedder {model_id} returned a vector holding NaN or infinity")
    return blob


def paused_in(db: IndexDB) -> bool:
    """True while the shared back-off after an embedding failure runs, as ``db`` (the writer's
    connection, or a reader's) sees it."""
    until = db.get_kv(PAUSE_KEY)
    if until is None:
        return False
    left = float(until) - time.time()
    # A back-off never lasts longer than PAUSE_SECONDS: more left means the clock was set back
    # after the pause began, which would otherwise keep vector recall off until it caught up.
    return 0 < left <= PAUSE_SECONDS


class VecIndex:
    """Per-store vec0 tables in the index database."""

    def __init__(self, db: IndexDB, embedder: Embedder, *, cache_tables: bool = True) -> None:
        if not db.vec_loaded:
            raise EmbeddingUnavailable("sqlite-vec is not installed: pip install 'coffer-memory[vector]'")
        self.db = db
        self.embedder = embedder
        # A reader beside the writing connection must not trust a cached name: the writer may
        # drop or rebuild a store's table.
        self.cache_tables = cache_tables
        self._ready: dict[str, str] = {}

    def forget_tables(self) -> None:
        """Drop the cached table names and matrices (the index file was replaced by a fresh one)."""
        self._ready.clear()
        with _matrices_guard:
            for key in [key for key in _matrices if key[0] == str(self.db.path)]:
                del _matrices[key]

    def paused(self) -> bool:
        """True while the shared back-off after an embedding failure runs (all processes see it)."""
        return paused_in(self.db)

    def pause(self, seconds: float = PAUSE_SECONDS) -> None:
        """Stop calling the embedder for ``seconds`` (at most ``PAUSE_SECONDS``; reads answer from
        keyword meanwhile)."""
        self.db.set_kv(PAUSE_KEY, repr(time.time() + min(seconds, PAUSE_SECONDS)))

    def resume(self) -> None:
        """End the back-off now."""
        self.db.set_kv(PAUSE_KEY, "0")

    @staticmethod
    def table_name(store: str) -> str:
        """``vec_chunks_<12-hex store scope>``."""
        return f"vec_chunks_{store_scope(store)}"

    def existing_table(self, store: str) -> str | None:
        """The store's table if it exists and matches the current model and width."""
        if self.cache_tables and store in self._ready:
            return self._ready[store]
        rows = self.db.rows(
            "SELECT table_name, model_id, dimensions FROM vec_stores WHERE resource_name = ?", (store,)
        )
        if rows and rows[0][1] == self.embedder.model_id and int(rows[0][2]) == self.embedder.dimensions:
            self._ready[store] = str(rows[0][0])
            return self._ready[store]
        return None

    def ensure_table(self, store: str) -> str:
        """The store's table, (re)created when missing or built for another model or width."""
        table = self.existing_table(store)
        if table is not None:
            return table
        table = self.table_name(store)
        with self.db.transaction():
            row = self.db.rows(
                "SELECT model_id, dimensions FROM vec_stores WHERE resource_name = ?", (store,)
            )
            if row and row[0][0] == self.embedder.model_id and int(row[0][1]) == self.embedder.dimensions:
                self._ready[store] = table  # another process built it meanwhile
                return table
            stale = row[0][0] if row else None
            self.db.conn.execute(f"DROP TABLE IF EXISTS {table}")
            self.db.conn.execute(VEC_TABLE.format(table=table, dimensions=self.embedder.dimensions))
            self.db.conn.execute(
                "INSERT INTO vec_stores (resource_name, table_name, model_id, dimensions) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(resource_name) DO UPDATE SET table_name = excluded.table_name, "
                "model_id = excluded.model_id, dimensions = excluded.dimensions",
                (store, table, self.embedder.model_id, self.embedder.dimensions),
            )
            # Everything already indexed lacks vectors of this model: the sentinel makes the
            # next reconcile re-embed every document of the store.
            self.db.conn.execute("UPDATE documents SET content_sha256 = '' WHERE resource_name = ?", (store,))
            self._changed(store)
        if stale is not None:
            log.info("re-embedding %s: model changed from %s to %s", store, stale, self.embedder.model_id)
        self._ready[store] = table
        return table

    def _changed(self, store: str) -> None:
        """Record that the store's vectors changed (in the caller's transaction)."""
        self.db.set_kv(VERSION_KEY + store, secrets.token_hex(8))

    def insert(self, store: str, rows: Sequence[tuple[str, Vector]]) -> None:
        """Insert ``(bare chunk id, vector)`` rows (delete first: vec0 has no INSERT OR REPLACE)."""
        table = self.ensure_table(store)
        if rows:
            self._changed(store)
        for chunk, vector in rows:
            checked_width(vector, self.embedder)
            self.db.conn.execute(f"DELETE FROM {table} WHERE chunk_id = ?", (chunk,))
            self.db.conn.execute(
                f"INSERT INTO {table} (chunk_id, embedding) VALUES (?, ?)",
                (chunk, finite_blob(vector, self.embedder.model_id)),
            )

    def delete(self, store: str, chunks: Sequence[str]) -> None:
        """Drop the vectors of these bare chunk ids (if the store has a table at all)."""
        rows = self.db.rows("SELECT table_name FROM vec_stores WHERE resource_name = ?", (store,))
        if not rows:
            return
        if chunks:
            self._changed(store)
        for chunk in chunks:
            self.db.conn.execute(f"DELETE FROM {rows[0][0]} WHERE chunk_id = ?", (chunk,))

    def drop_store(self, store: str) -> None:
        """Drop a store's table and its record."""
        rows = self.db.rows("SELECT table_name FROM vec_stores WHERE resource_name = ?", (store,))
        for (table,) in rows:
            self.db.conn.execute(f"DROP TABLE IF EXISTS {table}")
        self.db.conn.execute("DELETE FROM vec_stores WHERE resource_name = ?", (store,))
        self._changed(store)
        self._ready.pop(store, None)

    def stored(self, store: str, chunks: Sequence[str]) -> dict[str, bytes]:
        """The float32 blobs of these bare chunk ids that the store's current table holds (one
        point lookup each: vec0 answers ``IN`` with a scan of the whole table)."""
        table = self.existing_table(store)
        if table is None:
            return {}
        out: dict[str, bytes] = {}
        for chunk in chunks:
            rows = self.db.rows(f"SELECT embedding FROM {table} WHERE chunk_id = ?", (chunk,))
            if rows:
                out[chunk] = bytes(rows[0][0])
        return out

    def knn(self, store: str, vector: Vector, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest bare chunk ids with their cosine distance, nearest first."""
        table = self.existing_table(store)
        if table is None:
            return []
        matrix = self._matrix(store, table)
        if matrix is not None:
            return nearest(matrix, vector, k)
        return self.knn_scan(store, vector, k)

    def matrix(self, store: str) -> Matrix | None:
        """The store's vectors as ``knn`` scans them in memory, or None (no table, or ``knn``
        scans with vec0)."""
        table = self.existing_table(store)
        return self._matrix(store, table) if table is not None else None

    def knn_scan(self, store: str, vector: Vector, k: int) -> list[tuple[str, float]]:
        """``knn`` by vec0's own scan (stores too large for a matrix, or without numpy)."""
        table = self.existing_table(store)
        if table is None:
            return []
        rows = self.db.rows(
            f"SELECT chunk_id, distance FROM {table} WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (to_blob(vector), k),
        )
        return [(str(r[0]), float(r[1])) for r in rows]

    def _matrix(self, store: str, table: str) -> Matrix | None:
        """The store's vectors as of now, read again only when their token changed; None
        without numpy or for a store too large to hold in memory."""
        try:
            import numpy as np
        except ImportError:
            return None
        token = self.db.get_kv(VERSION_KEY + store)
        key = (str(self.db.path), table)
        with _matrices_guard:
            held = _matrices.get(key)
            if held is not None and held.token == token:
                return held
            _matrices.pop(key, None)  # stale: never answer from it again
            count = int(self.db.scalar(f"SELECT count(*) FROM {table}") or 0)
            if count * self.embedder.dimensions > MAX_MATRIX_FLOATS:
                return None
            rows = self.db.rows(f"SELECT chunk_id, embedding FROM {table}")
            dims = self.embedder.dimensions
            ids = [str(r[0]) for r in rows]
            raw = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype="<f4").reshape(len(rows), dims)
            norms = np.linalg.norm(raw, axis=1, keepdims=True)
            unit = (raw / np.where(norms > 0, norms, 1.0)).astype(np.float32)
            held = Matrix(token, ids, unit)
            _matrices[key] = held
            return held

    def knn_within(
        self, store: str, vector: Vector, k: int, chunk_rowids: tuple[str, list[object]]
    ) -> list[tuple[str, float]]:
        """Like ``knn``, over the chunks whose rowids the subquery gives (a tags or time filter):
        an exact scan of those vectors, so the ``k`` nearest are ``k`` matching ones."""
        table = self.existing_table(store)
        if table is None:
            return []
        sub, params = chunk_rowids
        # Each chunk's vector windows (``keys.vec_chunk_id``): "doc:pos", then "doc:pos:1"...
        suffixes = " UNION ALL ".join(["SELECT '' AS s", *(f"SELECT ':{w}'" for w in range(1, MAX_WINDOWS))])
        rows = self.db.rows(
            f"WITH w(s) AS ({suffixes}) "
            f"SELECT v.chunk_id, vec_distance_cosine(v.embedding, ?) AS distance FROM chunks c, w "
            f"JOIN {table} v ON v.chunk_id = c.document_id || ':' || c.position || w.s "
            f"WHERE c.rowid IN ({sub}) ORDER BY distance LIMIT ?",
            (to_blob(vector), *params, k),
        )
        return [(str(r[0]), float(r[1])) for r in rows]


def nearest(matrix: Matrix, vector: Vector, k: int) -> list[tuple[str, float]]:
    """The ``k`` rows nearest ``vector`` by cosine distance (vec0's measure), nearest first."""
    import numpy as np

    if not matrix.ids:
        return []
    query = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    # einsum's own loop, not BLAS: OpenBLAS's threads turned a 0.1 ms product into 15 ms on
    # a busy 2-core machine (spinning workers); einsum stays near 0.4 ms per 5k rows.
    similarity = np.einsum("ij,j->i", matrix.unit, query / norm if norm > 0 else query)
    if k < len(matrix.ids):
        top = np.argpartition(-similarity, k - 1)[:k]
        order = top[np.argsort(-similarity[top], kind="stable")]
    else:
        order = np.argsort(-similarity, kind="stable")
    ids = matrix.ids  # one ``tolist`` each: a float and an int per row cost twice as much
    distances = (1.0 - similarity[order].astype(np.float64)).tolist()
    return list(zip([ids[i] for i in order.tolist()], distances, strict=True))

"""Vector rows: one sqlite-vec ``vec0`` table per store, cosine distance, created lazily.

The table for a store is ``vec_chunks_<store-scope>``; ``vec_stores`` records the model id
and width it was built with. A different model or width drops the table and marks every
document of the store for re-indexing (the files are the truth).
"""

from __future__ import annotations

import array
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._errors import EmbeddingUnavailable
from .chunking import MAX_WINDOWS
from .db import IndexDB
from .keys import store_scope

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from ..plugins.hookspecs import Embedder, Vector

log = logging.getLogger("coffer_memory.vec")
PAUSE_KEY = "embedding_paused_until"
# After a failure the embedder is left alone this long, so a dead provider cannot stall
# every read with timeouts and retries; keyword answers (fallback=True) meanwhile.
PAUSE_SECONDS = 60.0


def to_blob(vector: Vector) -> bytes:
    """A float32 little-endian blob, what vec0 stores."""
    tobytes = getattr(vector, "tobytes", None)
    if tobytes is not None and getattr(vector, "dtype", None) is not None and str(vector.dtype) == "float32":  # type: ignore[attr-defined]
        return bytes(tobytes())
    return array.array("f", (float(x) for x in vector)).tobytes()


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
        """Drop the cached table names (the index file was replaced by a fresh one)."""
        self._ready.clear()

    def paused(self) -> bool:
        """True while the shared back-off after an embedding failure runs (all processes see it)."""
        until = self.db.get_kv(PAUSE_KEY)
        return until is not None and time.time() < float(until)

    def pause(self, seconds: float = PAUSE_SECONDS) -> None:
        """Stop calling the embedder for ``seconds`` (reads answer from keyword meanwhile)."""
        self.db.set_kv(PAUSE_KEY, repr(time.time() + seconds))

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
            self.db.conn.execute(
                f"CREATE VIRTUAL TABLE {table} USING vec0("
                f"chunk_id TEXT PRIMARY KEY, embedding float[{self.embedder.dimensions}] distance_metric=cosine)"
            )
            self.db.conn.execute(
                "INSERT INTO vec_stores (resource_name, table_name, model_id, dimensions) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(resource_name) DO UPDATE SET table_name = excluded.table_name, "
                "model_id = excluded.model_id, dimensions = excluded.dimensions",
                (store, table, self.embedder.model_id, self.embedder.dimensions),
            )
            # Everything already indexed lacks vectors of this model: the sentinel makes the
            # next reconcile re-embed every document of the store.
            self.db.conn.execute("UPDATE documents SET content_sha256 = '' WHERE resource_name = ?", (store,))
        if stale is not None:
            log.info("re-embedding %s: model changed from %s to %s", store, stale, self.embedder.model_id)
        self._ready[store] = table
        return table

    def insert(self, store: str, rows: Sequence[tuple[str, Vector]]) -> None:
        """Insert ``(bare chunk id, vector)`` rows (delete first: vec0 has no INSERT OR REPLACE)."""
        table = self.ensure_table(store)
        for chunk, vector in rows:
            if len(vector) != self.embedder.dimensions:
                raise EmbeddingUnavailable(
                    f"embedder {self.embedder.model_id} returned {len(vector)} dimensions, "
                    f"expected {self.embedder.dimensions}"
                )
            self.db.conn.execute(f"DELETE FROM {table} WHERE chunk_id = ?", (chunk,))
            self.db.conn.execute(
                f"INSERT INTO {table} (chunk_id, embedding) VALUES (?, ?)", (chunk, to_blob(vector))
            )

    def delete(self, store: str, chunks: Sequence[str]) -> None:
        """Drop the vectors of these bare chunk ids (if the store has a table at all)."""
        rows = self.db.rows("SELECT table_name FROM vec_stores WHERE resource_name = ?", (store,))
        if not rows:
            return
        for chunk in chunks:
            self.db.conn.execute(f"DELETE FROM {rows[0][0]} WHERE chunk_id = ?", (chunk,))

    def drop_store(self, store: str) -> None:
        """Drop a store's table and its record."""
        rows = self.db.rows("SELECT table_name FROM vec_stores WHERE resource_name = ?", (store,))
        for (table,) in rows:
            self.db.conn.execute(f"DROP TABLE IF EXISTS {table}")
        self.db.conn.execute("DELETE FROM vec_stores WHERE resource_name = ?", (store,))
        self._ready.pop(store, None)

    def knn(self, store: str, vector: Vector, k: int) -> list[tuple[str, float]]:
        """The ``k`` nearest bare chunk ids with their cosine distance, nearest first."""
        table = self.existing_table(store)
        if table is None:
            return []
        rows = self.db.rows(
            f"SELECT chunk_id, distance FROM {table} WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (to_blob(vector), k),
        )
        return [(str(r[0]), float(r[1])) for r in rows]

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

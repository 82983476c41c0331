"""The single re-index routine: every write path and every reconcile goes through it.

sha256 of the file unchanged -> no-op; changed -> drop the old chunk/FTS rows, re-chunk,
insert, upsert the documents row.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Literal

from ..store.files import FactParseError, ParsedFile, format_time, parse_fact, read_bytes
from ..store.paths import StorePaths, project_id_of
from .chunking import chunk_markdown
from .db import IndexDB

KIND = "memory"
Outcome = Literal["added", "updated", "unchanged"]


def store_scope(store: str, kind: str = KIND) -> str:
    """The 12-hex digest of (kind, store) that keeps chunk ids unique across stores."""
    return hashlib.sha256(f"{kind}\x00{store}".encode()).hexdigest()[:12]


def chunk_id(store: str, document_id: str, position: int) -> str:
    """``<store-scope>:<doc-id>:<position>``."""
    return f"{store_scope(store)}:{document_id}:{position}"


def document_id_of_chunk(chunk: str) -> str:
    """The document id inside a chunk id."""
    return chunk.split(":")[1]


class Reindexer:
    """Writes and removes index rows for memory files of one home."""

    def __init__(self, db: IndexDB, memory_dir: Path) -> None:
        self.db = db
        self.memory_dir = memory_dir

    def paths(self, store: str) -> StorePaths:
        """The store's paths."""
        return StorePaths.of(self.memory_dir, store)

    def index_file(
        self, store: str, path: Path, *, data: bytes | None = None, st: os.stat_result | None = None
    ) -> tuple[Outcome, ParsedFile]:
        """Bring the index in line with one file. Raises FactParseError (rows dropped) or OSError."""
        sp = self.paths(store)
        rel = sp.relative(path)
        if data is None or st is None:
            data, st = read_bytes(path)
        key = str(path)
        row = self.db.rows(
            "SELECT id, content_sha256 FROM documents WHERE resource_name = ? AND path = ?", (store, key)
        )
        try:
            parsed = parse_fact(data, store=store, relpath=rel, mtime=st.st_mtime)
        except FactParseError:
            if row:
                with self.db.transaction():
                    self._delete_rows(store, row[0][0])
            raise
        if row and row[0][1] == parsed.sha256 and row[0][0] == parsed.fact.id:
            self.db.conn.execute(
                "UPDATE documents SET file_size = ?, file_mtime_ns = ? WHERE resource_name = ? AND path = ?",
                (st.st_size, st.st_mtime_ns, store, key),
            )
            return "unchanged", parsed
        fact = parsed.fact
        with self.db.transaction():
            if row:
                self._delete_rows(store, row[0][0])
            self.db.conn.execute(
                "INSERT INTO documents (id, kind, resource_name, project_id, path, title, description, "
                "metadata, content_sha256, created_at, updated_at, file_size, file_mtime_ns) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    fact.id,
                    KIND,
                    store,
                    project_id_of(store),
                    key,
                    fact.title,
                    fact.description,
                    json.dumps({"actor": fact.actor, "origin_session_id": fact.origin_session_id}),
                    parsed.sha256,
                    format_time(fact.created_at),
                    format_time(fact.updated_at),
                    st.st_size,
                    st.st_mtime_ns,
                ),
            )
            for position, text in enumerate(chunk_markdown(fact.body)):
                cid = chunk_id(store, fact.id, position)
                self.db.conn.execute(
                    "INSERT INTO chunks (id, document_id, kind, resource_name, position) VALUES (?, ?, ?, ?, ?)",
                    (cid, fact.id, KIND, store, position),
                )
                # The FTS row shares the chunk's rowid, so deletes find it without a scan.
                self.db.conn.execute(
                    "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id) VALUES (?, ?, ?, ?)",
                    (self.db.conn.last_insert_rowid(), text, store, cid),
                )
        return ("updated" if row else "added"), parsed

    def _delete_rows(self, store: str, document_id: str) -> None:
        self.db.conn.execute(
            "DELETE FROM documents_fts WHERE rowid IN "
            "(SELECT rowid FROM chunks WHERE document_id = ? AND resource_name = ?)",
            (document_id, store),
        )
        self.db.conn.execute(
            "DELETE FROM chunks WHERE document_id = ? AND resource_name = ?", (document_id, store)
        )
        self.db.conn.execute(
            "DELETE FROM documents WHERE kind = ? AND resource_name = ? AND id = ?",
            (KIND, store, document_id),
        )

    def remove_path(self, store: str, path: Path) -> str | None:
        """Drop the rows of the document at ``path``; returns its id if there was one."""
        document_id = self.db.scalar(
            "SELECT id FROM documents WHERE resource_name = ? AND path = ?", (store, str(path))
        )
        if document_id is None:
            return None
        with self.db.transaction():
            self._delete_rows(store, document_id)
        return str(document_id)

    def remove_store(self, store: str) -> None:
        """Drop every index row of a store."""
        with self.db.transaction():
            self.db.conn.execute("DELETE FROM documents_fts WHERE resource_name = ?", (store,))
            self.db.conn.execute("DELETE FROM chunks WHERE resource_name = ?", (store,))
            self.db.conn.execute("DELETE FROM documents WHERE resource_name = ?", (store,))
            self.db.conn.execute("DELETE FROM store_state WHERE resource_name = ?", (store,))

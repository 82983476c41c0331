"""Open the index database: pragmas, numbered migrations, one connection per service."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from ..store.files import ensure_dir
from .cjk import index_text

# Each entry is one migration; the list index + 1 is the schema version it produces.
MIGRATIONS: tuple[str, ...] = (
    # 1: the seed's unified schema, its two store side tables, and what the index needs.
    """
    CREATE TABLE documents (
        id             TEXT NOT NULL,
        kind           TEXT NOT NULL,
        resource_name  TEXT NOT NULL,
        project_id     TEXT NOT NULL,
        path           TEXT NOT NULL,
        title          TEXT NOT NULL,
        description    TEXT,
        metadata       TEXT NOT NULL DEFAULT '{}',
        content_sha256 TEXT NOT NULL,
        source_mode    TEXT NOT NULL DEFAULT 'native',
        locked         BOOLEAN NOT NULL DEFAULT 0,
        created_at     TIMESTAMP NOT NULL,
        updated_at     TIMESTAMP NOT NULL,
        file_size      INTEGER NOT NULL DEFAULT -1,
        file_mtime_ns  INTEGER NOT NULL DEFAULT -1,
        PRIMARY KEY (kind, resource_name, id)
    );
    CREATE INDEX idx_documents_kind_res_time ON documents(kind, resource_name, updated_at DESC);
    CREATE INDEX idx_documents_project ON documents(project_id);
    CREATE UNIQUE INDEX idx_documents_path ON documents(resource_name, path);

    CREATE TABLE chunks (
        id            TEXT PRIMARY KEY,
        document_id   TEXT NOT NULL,
        kind          TEXT NOT NULL,
        resource_name TEXT NOT NULL,
        position      INTEGER NOT NULL
    );
    CREATE INDEX idx_chunks_document ON chunks(document_id);

    CREATE VIRTUAL TABLE documents_fts USING fts5(
        text, resource_name UNINDEXED, chunk_id UNINDEXED, tokenize='trigram'
    );

    CREATE TABLE memory_store_project_roots (
        store_name   TEXT PRIMARY KEY,
        project_root TEXT NOT NULL
    );
    CREATE TABLE memory_store_labels (
        store_name TEXT PRIMARY KEY,
        label      TEXT NOT NULL
    );

    CREATE TABLE audit_events (
        id          INTEGER PRIMARY KEY,
        at          TEXT NOT NULL,
        event       TEXT NOT NULL,
        store       TEXT,
        document_id TEXT,
        details     TEXT NOT NULL DEFAULT '{}'
    );
    CREATE INDEX idx_audit_store ON audit_events(store, id);

    CREATE TABLE store_state (
        resource_name  TEXT PRIMARY KEY,
        dirs           TEXT NOT NULL DEFAULT '{}',
        last_full_scan REAL NOT NULL DEFAULT 0,
        file_count     INTEGER NOT NULL DEFAULT 0
    );
    """,
    # 2: which vec0 table holds a store's embeddings, and for which model and width.
    """
    CREATE TABLE vec_stores (
        resource_name TEXT PRIMARY KEY,
        table_name    TEXT NOT NULL,
        model_id      TEXT NOT NULL,
        dimensions    INTEGER NOT NULL
    );
    CREATE INDEX idx_documents_pending ON documents(resource_name) WHERE content_sha256 = '';
    """,
    # 3: files that failed to parse (so unchanged ones are not re-read on every pass), and
    # small shared state such as the embedding back-off, which every process must see.
    """
    CREATE TABLE broken_files (
        resource_name TEXT NOT NULL,
        path          TEXT NOT NULL,
        file_size     INTEGER NOT NULL,
        file_mtime_ns INTEGER NOT NULL,
        error         TEXT NOT NULL,
        PRIMARY KEY (resource_name, path)
    );
    CREATE TABLE kv (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # 4: a word-level keyword index beside the trigram one (porter stemming, bm25 over words,
    # small posting lists). Contentless: the text stays once, in documents_fts (same rowid).
    # The derived rows are dropped so the next read rebuilds them from the files.
    """
    CREATE VIRTUAL TABLE documents_words USING fts5(
        text, store, content='', contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2'
    );
    DELETE FROM documents_fts;
    DELETE FROM chunks;
    DELETE FROM documents;
    DELETE FROM store_state;
    DELETE FROM broken_files;
    DELETE FROM vec_stores;
    """,
    # 5: the word index sees CJK runs as overlapping bigrams (index/cjk.py): rebuilt in place
    # from the stored chunk texts (the store scope is the chunk id's prefix), so no file is
    # re-read and no vector is recomputed.
    """
    INSERT INTO documents_words (documents_words) VALUES ('delete-all');
    INSERT INTO documents_words (rowid, text, store)
        SELECT rowid, coffer_index_text(text), substr(chunk_id, 1, instr(chunk_id, ':') - 1) FROM documents_fts;
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


MMAP_BYTES = 256 * 1024 * 1024


def _sql_index_text(*args: apsw.SQLiteValue) -> str:
    """``coffer_index_text(text)`` in SQL: what the word index stores for a chunk's text."""
    return index_text(str(args[0] or ""))


class IndexDB:
    """One apsw connection to ``index.db`` with WAL, a busy timeout and migrations applied."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 10_000) -> None:
        ensure_dir(path.parent)
        if not path.exists():
            # It holds every fact's text: private like the files (SQLite gives -wal/-shm the same mode).
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        self.path = path
        self.conn = apsw.Connection(str(path))
        self.conn.setbusytimeout(busy_timeout_ms)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # The index is derived from the files; a lost tail transaction is rebuilt by reconcile.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        # A vector search reads every vector of a store (15 MB at 10k facts): with SQLite's
        # default 2 MB page cache it evicts the keyword index each time. Memory-mapped reads
        # share the OS page cache instead of copying pages into a private cache.
        self.conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        self.vec_loaded = self._load_sqlite_vec()
        # Migrations that rebuild the word index segment text with the same code as reindex.
        self.conn.create_scalar_function("coffer_index_text", _sql_index_text, 1, deterministic=True)
        self._migrate()

    def _load_sqlite_vec(self) -> bool:
        """Load sqlite-vec when the ``[vector]`` extra is installed; False otherwise."""
        try:
            import sqlite_vec
        except ImportError:
            return False
        self.conn.enable_load_extension(True)
        try:
            self.conn.load_extension(sqlite_vec.loadable_path())
        finally:
            self.conn.enable_load_extension(False)
        return True

    def _migrate(self) -> None:
        version = int(self.scalar("PRAGMA user_version") or 0)
        if version >= SCHEMA_VERSION:
            return
        with self.transaction():
            version = int(self.scalar("PRAGMA user_version") or 0)
            for number in range(version, SCHEMA_VERSION):
                self.conn.execute(MIGRATIONS[number])
                self.conn.execute(f"PRAGMA user_version={number + 1}")

    @contextmanager
    def transaction(self) -> Iterator[apsw.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK`` on error); nests as a savepoint."""
        if not self.conn.get_autocommit():
            with self.conn:
                yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """All rows of a query."""
        return list(self.conn.execute(sql, params))

    def scalar(self, sql: str, params: Any = ()) -> Any:
        """The first column of the first row, or ``None``."""
        for row in self.conn.execute(sql, params):
            return row[0]
        return None

    def get_kv(self, key: str) -> str | None:
        """A value of the small shared key/value table."""
        value = self.scalar("SELECT value FROM kv WHERE key = ?", (key,))
        return None if value is None else str(value)

    def set_kv(self, key: str, value: str) -> None:
        """Set a value of the shared key/value table."""
        self.conn.execute(
            "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

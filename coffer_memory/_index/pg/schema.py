"""The PostgreSQL index schema, created and migrated under an advisory lock (several processes
may open one database at once)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import psycopg

from ..cjk import index_text
from ..hant import fold

log = logging.getLogger("coffer_memory.postgresql")
# The text search configuration of the word index: stemming like SQLite's porter tokenizer.
TS_CONFIG = "english"
SCHEMA_VERSION = 3  # 2: coffer_vectors (when pgvector is there); 3: words of traditional Han folded
# Taken by every process that opens the index, so two never create the tables at once.
_MIGRATION_LOCK = 0x636F66666572  # "coffer"

_TABLES = """
CREATE TABLE IF NOT EXISTS coffer_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS coffer_stores (name text PRIMARY KEY, version bigint NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS coffer_documents (
    store text NOT NULL,
    path text NOT NULL,
    id text NOT NULL,
    sha256 text NOT NULL,
    title text NOT NULL,
    description text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    tags text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (store, path)
);
CREATE INDEX IF NOT EXISTS coffer_documents_tags ON coffer_documents USING gin (tags);
CREATE INDEX IF NOT EXISTS coffer_documents_time ON coffer_documents (store, updated_at);
CREATE TABLE IF NOT EXISTS coffer_chunks (
    store text NOT NULL,
    path text NOT NULL,
    position int NOT NULL,
    text text NOT NULL,
    words tsvector NOT NULL,
    PRIMARY KEY (store, path, position),
    FOREIGN KEY (store, path) REFERENCES coffer_documents (store, path) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS coffer_chunks_words ON coffer_chunks USING gin (words);
"""
_TRIGRAMS = "CREATE INDEX IF NOT EXISTS coffer_chunks_trigrams ON coffer_chunks USING gin (text gin_trgm_ops)"
# One row per vector window of a chunk, per embedding model: hosts with different models share a
# database, and each searches only its own model's rows (at its width: the column is untyped).
_VECTORS = """
CREATE TABLE IF NOT EXISTS coffer_vectors (
    store text NOT NULL,
    path text NOT NULL,
    model text NOT NULL,
    dimensions int NOT NULL,
    position int NOT NULL,
    part int NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (store, path, model, position, part),
    FOREIGN KEY (store, path) REFERENCES coffer_documents (store, path) ON DELETE CASCADE
);
"""


class Extensions(NamedTuple):
    """Which optional extensions the database has: pg_trgm (substrings), pgvector (vectors)."""

    trigram: bool
    vectors: bool


def _extension(conn: psycopg.Connection[Any], name: str, without: str) -> bool:
    """Whether extension ``name`` is (or could be made) installed in this database."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (name,)).fetchone():
        return True
    try:
        with conn.transaction():
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
        return True
    except psycopg.Error as exc:  # not installed on the server, or no right to create it
        log.warning("%s is not available (%s): %s", name, str(exc).strip(), without)
        return False


def _fold_words(conn: psycopg.Connection[Any]) -> None:
    """3: a chunk's words see traditional Han characters as their simplified forms, as the SQLite
    word index does (``index/hant.py``): the rows whose text holds one are written again."""
    rows = conn.execute("SELECT store, path, position, text FROM coffer_chunks WHERE text ~ '[^\\x01-\\x7f]'")
    changed = [(index_text(t), s, p, n) for s, p, n, t in rows.fetchall() if fold(t) != t]
    if changed:
        with conn.cursor() as cur:
            cur.executemany(
                f"UPDATE coffer_chunks SET words = to_tsvector('{TS_CONFIG}', %s) "
                "WHERE store = %s AND path = %s AND position = %s",
                changed,
            )


def migrate(conn: psycopg.Connection[Any]) -> Extensions:
    """Create the tables (idempotent) and bring older rows up to this version; which extensions
    are there."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        found = Extensions(
            trigram=_extension(conn, "pg_trgm", "substring recall scans without an index"),
            vectors=_extension(
                conn, "vector", "vectors stay in each machine's local index (PostgreSQL is keyword-only)"
            ),
        )
        conn.execute(_TABLES)
        row = conn.execute("SELECT value FROM coffer_meta WHERE key = 'schema_version'").fetchone()
        if row is not None and int(row[0]) < 3:
            _fold_words(conn)
        if found.trigram:
            conn.execute(_TRIGRAMS)
        if found.vectors:
            conn.execute(_VECTORS)
        conn.execute(
            "INSERT INTO coffer_meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(SCHEMA_VERSION),),
        )
    return found

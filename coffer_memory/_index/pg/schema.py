"""The PostgreSQL index schema, created and migrated under an advisory lock (several processes
may open one database at once)."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import psycopg

from ..cjk import index_text
from ..hant import fold
from .text import searched_form, with_parts

log = logging.getLogger("coffer_memory.postgresql")
# The text search configuration of the word index: stemming like SQLite's porter tokenizer.
TS_CONFIG = "english"
# 2: coffer_vectors (when pgvector is there); 3: words of traditional Han folded; 4: coffer_meta's
# folder_id binds the database to one memory folder (``binding``): a coffer older than 4 does not
# check it, so it refuses the database as too new instead of removing the rows of other folders.
# 5: a chunk's words hold the parts of paths, hosts and dotted names (``text.with_parts``).
# 6: substrings are searched in a chunk's NFKC form (``searched``, ``text.SEARCHED``).
SCHEMA_VERSION = 6
# The oldest server the index runs on (``server_version_num``): 12 for ``WITH ... AS MATERIALIZED``
# (vector recall); 11 for ``hashtextextended`` (every write's lock key), 9.5 for ``ON CONFLICT``.
MIN_SERVER_VERSION = 120000
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
ALTER TABLE coffer_chunks ADD COLUMN IF NOT EXISTS searched text;
"""
# pg_trgm's index of what substrings are searched in: a chunk's NFKC form where that differs
# (``searched``, ``cjk.index_forms``), else its text. Before 6 it was of the text alone.
_TRIGRAMS = (
    "CREATE INDEX IF NOT EXISTS coffer_chunks_searched ON coffer_chunks "
    "USING gin ((coalesce(searched, text)) gin_trgm_ops)"
)
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
    """Which optional extensions the database has: pg_trgm (substrings), pgvector (vectors); and
    whether this connection's ``role`` may write the index (a read-only member's may not)."""

    trigram: bool
    vectors: bool
    writable: bool = True
    role: str = ""


def _extension(conn: psycopg.Connection[Any], name: str, without: str, missing: list[str]) -> bool:
    """Whether extension ``name`` is (or could be made) installed in this database; if not, the
    warning to log goes into ``missing``."""
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (name,)).fetchone():
        return True
    try:
        with conn.transaction():
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
        return True
    except psycopg.Error as exc:  # not installed on the server, or no right to create it
        # One line (the server's HINT folded in): a start-up warning, not a paragraph.
        missing.append(f"{name} is not available ({' '.join(str(exc).split())}): {without}")
        return False


def _fold_words(conn: psycopg.Connection[Any]) -> None:
    """3: a chunk's words see traditional Han characters as their simplified forms, as the SQLite
    word index does (``index/hant.py``): the rows whose text holds one are written again."""
    rows = conn.execute("SELECT store, path, position, text FROM coffer_chunks WHERE text ~ '[^\\x01-\\x7f]'")
    _rewrite(conn, [(s, p, n, t) for s, p, n, t in rows.fetchall() if fold(t) != t])


def _split_words(conn: psycopg.Connection[Any]) -> None:
    """5: a chunk's words hold the parts of the paths, hosts and dotted names in it, as SQLite's
    do (``text.with_parts``): the rows whose text holds one are written again."""
    rows = conn.execute(r"SELECT store, path, position, text FROM coffer_chunks WHERE text ~ '\w[./@:\\]+\w'")
    _rewrite(conn, rows.fetchall())


def _searched(conn: psycopg.Connection[Any]) -> None:
    """6: the NFKC form of each chunk that NFKC changes, where substrings are searched (queries
    are NFKC: a full-width ``ｆｕｌｌｗｉｄｔｈ`` was found by ``fullwidth`` but not by ``fullw``); the
    trigram index of the text alone is dropped for the one of that form."""
    conn.execute("DROP INDEX IF EXISTS coffer_chunks_trigrams")
    rows = conn.execute("SELECT store, path, position, text FROM coffer_chunks WHERE text ~ '[^\\x01-\\x7f]'")
    changed = [(f, s, p, n) for s, p, n, t in rows.fetchall() if (f := searched_form(t)) is not None]
    if changed:
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE coffer_chunks SET searched = %s WHERE store = %s AND path = %s AND position = %s",
                changed,
            )


def _rewrite(conn: psycopg.Connection[Any], rows: list[tuple[Any, ...]]) -> None:
    """The words of these (store, path, position, text) chunks, as this version writes them."""
    if rows:
        with conn.cursor() as cur:
            cur.executemany(
                f"UPDATE coffer_chunks SET words = to_tsvector('{TS_CONFIG}', %s) "
                "WHERE store = %s AND path = %s AND position = %s",
                [(index_text(with_parts(t)), s, p, n) for s, p, n, t in rows],
            )


def release(number: int) -> str:
    """A ``server_version_num`` as PostgreSQL names its releases: ``160002`` -> ``16.2``,
    ``120000`` -> ``12``, and before 10 three parts (``90624`` -> ``9.6.24``)."""
    if number >= 100000:
        return f"{number // 10000}.{number % 10000}" if number % 10000 else str(number // 10000)
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def too_old(conn: psycopg.Connection[Any], needed: int = MIN_SERVER_VERSION) -> str | None:
    """Why the server of ``conn`` is too old for the index (one line naming the version found and
    the one needed), or None. The version is the one the server reported as the connection
    started (no round trip)."""
    found = conn.info.server_version
    if found >= needed:
        return None
    where = f"{conn.info.host}:{conn.info.port}" if conn.info.host else "the server"
    return (
        f"PostgreSQL {release(found)} at {where} is too old for coffer's index, which needs "
        f"PostgreSQL {release(needed)} or later: upgrade the server (docs/team.md, 'Set-up')"
    )


class SchemaTooNew(Exception):
    """The database was migrated by a newer coffer-memory than this one (the message says so)."""

    def __init__(self, current: int) -> None:
        super().__init__(
            f"the database's coffer schema is version {current}, newer than this coffer-memory's "
            f"{SCHEMA_VERSION}: upgrade coffer-memory on this host (pip install -U 'coffer-memory[postgresql]')"
        )


# Read with each write's lock (no round trip of its own): a process that was running when a newer
# coffer migrated the database refuses to write rows the newer version reads otherwise.
CURRENT_VERSION = "(SELECT value FROM coffer_meta WHERE key = 'schema_version')"


def _current(conn: psycopg.Connection[Any]) -> int | None:
    """The database's schema version; None before coffer's tables exist."""
    if conn.execute("SELECT to_regclass('coffer_meta')").fetchone() in (None, (None,)):
        return None
    row = conn.execute("SELECT value FROM coffer_meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row is not None else None


def _settled(conn: psycopg.Connection[Any], found: Extensions) -> bool:
    """Whether every table and index this version wants is there already (nothing to create)."""
    wanted = ["coffer_documents", "coffer_chunks", "coffer_stores"]
    wanted += ["coffer_chunks_searched"] if found.trigram else []
    wanted += ["coffer_vectors"] if found.vectors else []
    row = conn.execute("SELECT bool_and(to_regclass(n) IS NOT NULL) FROM unnest(%s::text[]) n", (wanted,))
    return bool((row.fetchone() or (False,))[0])


def _writable(conn: psycopg.Connection[Any]) -> tuple[bool, str]:
    """Whether the connection's role may write the index rows; the role's name."""
    row = conn.execute(
        "SELECT current_user, bool_and(has_table_privilege(t, 'INSERT, UPDATE, DELETE')) "
        "FROM unnest(ARRAY['coffer_documents', 'coffer_chunks', 'coffer_stores']) t"
    ).fetchone()
    return (bool(row[1]), str(row[0])) if row is not None else (False, "")


def migrate(conn: psycopg.Connection[Any], *, vectors_wanted: bool = True) -> Extensions:
    """Create the tables (idempotent) and bring older rows up to this version; which extensions
    are there. A database already at this version is only read (a read-only role opens it);
    one at a newer version raises ``SchemaTooNew`` (this coffer would write rows it no longer
    reads the same way, and mark the schema older again). Without ``vectors_wanted`` (a home
    with no vector mode) a missing pgvector is logged at INFO: it was a warning on every command
    of a keyword-only team."""
    missing: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        current = _current(conn)
        if current is not None and current > SCHEMA_VERSION:
            raise SchemaTooNew(current)
        trigram = _extension(conn, "pg_trgm", "substring recall scans without an index", missing)
        unwanted: list[str] = []
        found = Extensions(
            trigram=trigram,
            vectors=_extension(
                conn,
                "vector",
                "vectors stay in each machine's local index (PostgreSQL is keyword-only)",
                missing if vectors_wanted else unwanted,
            ),
        )
        if current != SCHEMA_VERSION or not _settled(conn, found):
            conn.execute(_TABLES)
            if current is not None and current < 3:
                _fold_words(conn)
            if current is not None and current < 5:
                _split_words(conn)
            if current is not None and current < 6:
                _searched(conn)
            if found.trigram:
                conn.execute(_TRIGRAMS)
            if found.vectors:
                conn.execute(_VECTORS)
            conn.execute(
                "INSERT INTO coffer_meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
        writable, role = _writable(conn)
    # Said once the schema is settled: a start that fails (a role that may not create the tables)
    # says that one line, not first two warnings about what it would have done without them.
    for warning in missing:
        log.warning("%s", warning)
    for line in unwanted:
        log.info("%s", line)
    return found._replace(writable=writable, role=role)

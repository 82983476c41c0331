"""The index's numbered migrations: SQL, or a function of the connection for rewrites SQL cannot
say. ``MIGRATIONS[i]`` produces schema version ``i + 1``; ``IndexDB`` (``db.py``) applies the
ones a file lacks, all in one transaction, when it opens the file.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from .cjk import index_forms, index_text
from .coverage import stored_tokens
from .hant import fold

# "CFFR": marks an index as ours, so another program's SQLite file is never migrated into one.
APPLICATION_ID = 0x43464652


def _home_relative(path: str, store: str) -> str | None:
    """A schema-4 absolute path as a home-relative one (found by the store's folder, so a home
    moved before the migration ran is rewritten too); None if it is not under a store folder."""
    folder = "memory/global/" if store == "global" else f"memory/projects/{store.removeprefix('project-')}/"
    at = path.rfind("/" + folder)
    return path[at + 1 :] if at >= 0 else None


def _relative_paths(conn: apsw.Connection) -> None:
    """5: paths relative to the home (a moved home keeps its index), ctime and inode beside
    size and mtime (an edit that keeps both is seen). Rows are rewritten, not dropped, so no
    document is re-embedded."""
    for table in ("documents", "broken_files"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN file_ctime_ns INTEGER NOT NULL DEFAULT -1")
        conn.execute(f"ALTER TABLE {table} ADD COLUMN file_ino INTEGER NOT NULL DEFAULT -1")
    conn.execute("DELETE FROM broken_files")  # found again by the next scan
    conn.execute("DELETE FROM store_state")  # the next read runs a full scan
    rows = list(conn.execute("SELECT rowid, resource_name, path FROM documents"))
    for rowid, store, path in rows:
        rel = _home_relative(path, store)
        try:
            if rel is None:
                raise apsw.ConstraintError("not under a store folder")
            conn.execute("UPDATE documents SET path = ? WHERE rowid = ?", (rel, rowid))
        except apsw.ConstraintError:  # two rows for one file (a home copied before): keep one
            _drop_document(conn, rowid)
    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")


def _drop_document(conn: apsw.Connection, rowid: int) -> None:
    for table in ("documents_fts", "documents_words"):
        conn.execute(
            f"DELETE FROM {table} WHERE rowid IN (SELECT c.rowid FROM chunks c JOIN documents d "
            "ON c.document_id = d.id AND c.resource_name = d.resource_name WHERE d.rowid = ?)",
            (rowid,),
        )
    conn.execute(
        "DELETE FROM chunks WHERE rowid IN (SELECT c.rowid FROM chunks c JOIN documents d "
        "ON c.document_id = d.id AND c.resource_name = d.resource_name WHERE d.rowid = ?)",
        (rowid,),
    )
    conn.execute("DELETE FROM documents WHERE rowid = ?", (rowid,))


def _segment_words(conn: apsw.Connection) -> None:
    """6: the word index sees CJK runs as overlapping bigrams (``index/cjk.py``). Rebuilt in place
    from the stored chunk texts (the store is the chunk id's prefix), so no file is re-read and
    no vector is recomputed."""
    conn.execute("INSERT INTO documents_words (documents_words) VALUES ('delete-all')")
    _refill_words(conn)


def _refill_words(conn: apsw.Connection) -> None:
    """The word index's rows from the stored chunk texts (the store is the chunk id's prefix);
    no context (a column left out is empty)."""
    rows = list(conn.execute("SELECT rowid, text, chunk_id FROM documents_fts"))
    for rowid, text, chunk_id in rows:
        store = str(chunk_id).split(":", 1)[0]
        conn.execute(
            "INSERT INTO documents_words (rowid, text, store) VALUES (?, ?, ?)",
            (rowid, index_text(str(text or "")), store),
        )


def _session_column(conn: apsw.Connection) -> None:
    """8: ``documents.origin_session``, computed from the metadata JSON, and its index (an index
    rolled back to an older version number keeps the column: not added twice)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_xinfo(documents)")}
    if "origin_session" not in columns:
        conn.execute(
            "ALTER TABLE documents ADD COLUMN origin_session TEXT "
            "GENERATED ALWAYS AS (json_extract(metadata, '$.origin_session_id')) VIRTUAL"
        )
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_documents_session ON documents(resource_name, origin_session, id) "
        "WHERE origin_session IS NOT NULL"
    )


# The word index's columns and tokenizer (migrations 4 and 9): ``text`` the chunk, ``store`` its
# store scope (``keys.store_scope``, weight 0), ``context`` words that only lead to it (a session
# fact's predecessor's last line, ``reindex.KEYWORD_CONTEXT_LINES``; weight ``fts.CONTEXT_WEIGHT``).
WORDS_TABLE = (
    "CREATE VIRTUAL TABLE documents_words USING fts5(text, store, context, content='', "
    "contentless_delete=1, tokenize='porter unicode61 remove_diacritics 2')"
)


def _context_column(conn: apsw.Connection) -> None:
    """9: the word index gains a ``context`` column (FTS5 cannot add one: the table is made
    again and its rows written back from the stored chunk texts, context empty). Session facts
    are then read again by the next scan (sentinel sha256, stat columns cleared), which writes
    their context; their vectors are embedded again on the way (same text, same vectors)."""
    conn.execute("DROP TABLE documents_words")
    conn.execute(WORDS_TABLE)
    _refill_words(conn)
    conn.execute("UPDATE documents SET content_sha256 = '', file_size = -1 WHERE origin_session IS NOT NULL")
    if conn.changes():  # the next read runs a full scan, which finds them changed
        conn.execute("DELETE FROM store_state")


# In the ``kv`` table while a bulk load has committed session facts whose keyword context waits
# for its end (``session.write_load_contexts``): a load that finds it set finishes the work of one
# cut short. Migration 10 sets it too.
CONTEXT_PENDING_KEY = "keyword_context_pending"


def _fold_words(conn: apsw.Connection) -> None:
    """10: the word index sees traditional Han characters as their simplified forms
    (``index/hant.py``). When a stored chunk holds one, the word index is written again from the
    stored chunk texts (no file re-read, no vector recomputed); session facts' keyword context
    (a column the refill leaves empty) is then written by the next scan of every store, as after
    a bulk load cut short. An index without such a character is left as it is."""
    texts = (str(r[0] or "") for r in conn.execute("SELECT text FROM documents_fts"))
    if not any(not t.isascii() and fold(t) != t for t in texts):
        return
    conn.execute("INSERT INTO documents_words (documents_words) VALUES ('delete-all')")
    _refill_words(conn)
    if conn.execute("SELECT 1 FROM documents WHERE origin_session IS NOT NULL LIMIT 1").fetchone():
        conn.execute(
            "INSERT INTO kv (key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = '1'",
            (CONTEXT_PENDING_KEY,),
        )
        conn.execute("DELETE FROM store_state")


# The trigram index (migration 11): ``text`` the chunk as searched (NFKC in lower case where NFKC
# changes it, ``cjk.index_forms``), ``written`` the chunk as its fact writes it where that differs
# (NULL otherwise: ASCII costs nothing), the store and the chunk id. Every read of a chunk's text
# takes ``coalesce(written, text)`` (``keys.SHOWN``); the word index is keyed by the same rowid.
TRIGRAM_TABLE = (
    "CREATE VIRTUAL TABLE documents_fts USING fts5(text, resource_name UNINDEXED, chunk_id UNINDEXED, "
    "written UNINDEXED, tokenize='trigram')"
)


def _fold_trigrams(conn: apsw.Connection) -> None:
    """11: the trigram index holds NFKC text, as queries are: a full-width ``ｆｕｌｌｗｉｄｔｈ`` was
    found by the word ``fullwidth`` but not by the fragment ``fullw``. FTS5 cannot add a column:
    the table is made again and its rows written back, each text as ``cjk.index_forms`` splits it
    (no file re-read, no vector recomputed; the trigram index's pending-terms size is set again
    by the next bulk load, ``segments.bulk_hash``)."""
    # A text's bytes, so that one another program wrote that is not UTF-8 (or a blob, a NULL) is
    # written back as it was: the values check finds it and the file is rebuilt (``values.py``).
    rows = conn.execute(
        "SELECT rowid, CASE typeof(text) WHEN 'text' THEN CAST(text AS BLOB) ELSE text END, "
        "typeof(text), resource_name, chunk_id FROM documents_fts"
    )
    good, odd = [], []
    for rowid, value, kind, store, chunk in list(rows):
        try:
            text = value.decode("utf-8") if kind == "text" else None
        except UnicodeDecodeError:
            text = None
        if text is None:
            odd.append((rowid, value, kind == "text", store, chunk))
        else:
            good.append((rowid, *index_forms(text)[1:], store, chunk))
    conn.execute("DROP TABLE documents_fts")
    conn.execute(TRIGRAM_TABLE)
    conn.executemany(
        "INSERT INTO documents_fts (rowid, text, written, resource_name, chunk_id) VALUES (?, ?, ?, ?, ?)",
        good,
    )
    conn.executemany(
        "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id) "
        "VALUES (?1, CASE WHEN ?3 THEN CAST(?2 AS TEXT) ELSE ?2 END, ?4, ?5)",
        odd,
    )


def _chunk_tokens(conn: apsw.Connection) -> None:
    """12: ``chunks.tokens``, each chunk's tokens as keyword recall's coverage compares them
    (``coverage.stored_tokens``), so that a recall tokenizes none of its candidates' texts. Added
    in place (no file re-read, no vector recomputed): the column, then each stored chunk text
    tokenized. A text another program wrote that is no UTF-8 (or no text) keeps NULL, which a
    recall reads as "not stored" (the values check finds the text itself); an index rolled back
    to an older version number keeps the column (not added twice)."""
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_xinfo(chunks)")}
    if "tokens" not in columns:
        conn.execute("ALTER TABLE chunks ADD COLUMN tokens TEXT")
    rows = conn.execute(
        "SELECT c.rowid, CAST(coalesce(f.written, f.text) AS BLOB), typeof(coalesce(f.written, f.text)) "
        "FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid"
    )
    made = []
    for rowid, value, kind in list(rows):
        try:
            text = value.decode("utf-8") if kind == "text" else None
        except UnicodeDecodeError:
            text = None
        made.append((None if text is None else stored_tokens(text), rowid))
    conn.executemany("UPDATE chunks SET tokens = ? WHERE rowid = ?", made)


# Each entry is one migration (SQL, or a function of the connection for rewrites SQL cannot
# say); the list index + 1 is the schema version it produces.
MIGRATIONS: tuple[str | Callable[[apsw.Connection], None], ...] = (
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
    # 5: home-relative paths, ctime and inode (see _relative_paths).
    _relative_paths,
    # 6: the word index sees CJK runs as overlapping bigrams (index/cjk.py): rebuilt in place.
    _segment_words,
    # 7: a fact's frontmatter tags, one row per tag, for filters inside the index query. A
    # trigger drops them with their document, whichever path deletes it. Every file is read once
    # more (the stat columns no longer match), so tags written by hand before are picked up.
    # IF NOT EXISTS: an index rolled back to an older version number keeps its tables.
    """
    CREATE TABLE IF NOT EXISTS document_tags (
        document_rowid INTEGER NOT NULL,
        tag            TEXT NOT NULL,
        PRIMARY KEY (tag, document_rowid)
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS idx_document_tags_document ON document_tags(document_rowid);
    CREATE TRIGGER IF NOT EXISTS documents_drop_tags AFTER DELETE ON documents BEGIN
        DELETE FROM document_tags WHERE document_rowid = old.rowid;
    END;
    UPDATE documents SET file_size = -1;
    DELETE FROM store_state;
    """,
    # 8: the agent session a fact came from (its frontmatter's origin_session_id, already in
    # the metadata JSON), as a column computed from that JSON, so a rebuild cannot disagree with
    # it; its facts in id (= creation) order are the session's sequence (``_index/session.py``).
    _session_column,
    # 9: a context column in the word index (see _context_column).
    _context_column,
    # 10: traditional Han characters folded to simplified in the word index (see _fold_words).
    _fold_words,
    # 11: the trigram index holds NFKC text, the text as written beside it (see _fold_trigrams).
    _fold_trigrams,
    # 12: each chunk's tokens as coverage compares them, beside it (see _chunk_tokens).
    _chunk_tokens,
)

SCHEMA_VERSION = len(MIGRATIONS)

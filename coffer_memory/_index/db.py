"""Open the index database: pragmas, numbered migrations, one connection per service.

The index is derived from the files, so a damaged or foreign ``index.db`` is never fatal: on
open (and when SQLite reports corruption during use) it is moved aside as
``index.db.corrupt-<timestamp>`` (the newest ``KEEP_DAMAGED`` are kept), a fresh one is
created, and reconcile rebuilds it from the files. Paths in the index are relative to the
home, so a moved or copied home keeps its index.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
import attrs

from .._home import HomeLayout
from .._store.files import ensure_dir, move_aside
from .._store.lock import store_lock
from .cjk import index_text
from .hant import fold

log = logging.getLogger("coffer_memory._index")
# "CFFR": marks an index as ours, so another program's SQLite file is never migrated into one.
APPLICATION_ID = 0x43464652
KEEP_DAMAGED = 3
REPAIRS_KEY = "index_repairs"
DAMAGE = (apsw.CorruptError, apsw.NotADBError)
# Tables every schema version from 1 on has: one missing means a damaged index.
CORE_TABLES = frozenset({"documents", "chunks", "documents_fts", "store_state"})


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
)

SCHEMA_VERSION = len(MIGRATIONS)


MMAP_BYTES = 256 * 1024 * 1024


@attrs.define
class _Shared:
    """What every connection of this process to one index file must see: a repair by one of
    them (the others reopen), or damage one of them met (the next reconcile repairs it)."""

    generation: int = 0
    damaged: str | None = None


_shared: dict[str, _Shared] = {}
_shared_guard = threading.Lock()


def _shared_state(path: Path) -> _Shared:
    with _shared_guard:
        return _shared.setdefault(str(path), _Shared())


class _Connection(apsw.Connection):
    """An apsw connection that notes SQLite's corruption errors for the repair on the next read."""

    owner: IndexDB

    def execute(self, *args: Any, **kwargs: Any) -> apsw.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except DAMAGE as exc:
            self.owner.note_damage(exc)
            raise

    def executemany(self, *args: Any, **kwargs: Any) -> apsw.Cursor:
        try:
            return super().executemany(*args, **kwargs)
        except DAMAGE as exc:
            self.owner.note_damage(exc)
            raise


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class IndexDB:
    """One apsw connection to ``index.db`` with WAL, a busy timeout and migrations applied.

    A damaged or foreign file found on open is moved aside and replaced (see the module doc).
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 10_000) -> None:
        ensure_dir(path.parent)
        self.path = path
        self.home = path.parent
        self.closed = False
        self.busy_timeout_ms = busy_timeout_ms
        self.shared = _shared_state(path)
        self._open()

    # -- paths ------------------------------------------------------------------------------------
    def key(self, path: Path) -> str:
        """``documents.path`` of a file: POSIX and relative to the home."""
        return path.relative_to(self.home).as_posix()

    def file(self, key: str) -> Path:
        """The absolute path of a ``documents.path`` value."""
        return self.home / key

    # -- open, check, repair ----------------------------------------------------------------------
    def _open(self) -> None:
        for _attempt in range(3):
            if not self.path.exists():
                # It holds every fact's text: private like the files (SQLite gives -wal/-shm the same mode).
                with suppress(FileExistsError):
                    os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
            self._ino = os.stat(self.path).st_ino
            self.generation = self.shared.generation
            try:
                self.conn = _Connection(str(self.path))
                self.conn.owner = self
                self.conn.setbusytimeout(self.busy_timeout_ms)
                problem = self._foreign()  # before any pragma writes to a file that may not be ours
                if problem is None:
                    self._configure()
                    self._migrate()
                    return
            except DAMAGE as exc:
                problem = _describe(exc)
            self._close_quietly()
            self._move_aside(problem, self._ino)
        raise apsw.CantOpenError(f"{self.path} is damaged again after being replaced twice")

    def _configure(self) -> None:
        # Turning a new file to WAL needs it alone, and SQLite answers BUSY at once (no busy
        # handler) while another process's connection holds it: processes opening a fresh home
        # together crashed with "database is locked". Retry within the busy timeout.
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                break
            except apsw.BusyError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)
        # The index is derived from the files; a lost tail transaction is rebuilt by reconcile.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        # A vector search reads every vector of a store (15 MB at 10k facts): with SQLite's
        # default 2 MB page cache it evicts the keyword index each time. Memory-mapped reads
        # share the OS page cache instead of copying pages into a private cache.
        self.conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        self.vec_loaded = self._load_sqlite_vec()

    def _foreign(self) -> str | None:
        """Why this file is not an index we can use (another program's, a newer schema, tables
        missing), or None."""
        # One read transaction for the three reads: another process may commit the migrations
        # between them, and a version read before its commit with the tables read after looked like
        # "tables that are not an index", so a fresh index was moved aside under its writer.
        self.conn.execute("BEGIN")
        try:
            version = int(self.scalar("PRAGMA user_version") or 0)
            app = int(self.scalar("PRAGMA application_id") or 0)
            tables = {str(r[0]) for r in self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            with suppress(apsw.Error):  # a file that is no database fails the reads, maybe the end too
                self.conn.execute("COMMIT")
        if app not in (0, APPLICATION_ID):
            return f"another program's SQLite file (application_id {app:#x})"
        if version == 0:
            return (
                f"an SQLite file with tables that are not an index ({', '.join(sorted(tables))})"
                if tables
                else None
            )
        if version > SCHEMA_VERSION:
            return f"schema version {version} is newer than this coffer-memory's ({SCHEMA_VERSION})"
        if not tables >= CORE_TABLES:
            return f"tables missing: {', '.join(sorted(CORE_TABLES - tables))}"
        return None

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            with suppress(apsw.Error):
                conn.close()

    def _move_aside(self, problem: str, ino: int) -> None:
        """Rename the damaged file (and its -wal/-shm) away, unless another process did already."""
        with store_lock(HomeLayout(self.home).index_repair_lock):
            try:
                replaced = os.stat(self.path).st_ino != ino
            except FileNotFoundError:
                replaced = True
            if replaced:  # another process moved it aside meanwhile: open the new one
                self._replaced()
                return
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            target = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
            move_aside(self.path, target, suffixes=("-wal", "-shm"))
            self._prune_damaged()
            self._replaced()
        message = f"{problem}; moved to {target.name}"
        self._pending_repairs = [*getattr(self, "_pending_repairs", []), f"{stamp}: {message}"]
        log.warning("index %s is damaged (%s): rebuilding from the files", self.path, message)

    def _replaced(self) -> None:
        """The file at ``path`` is a new one: every connection of this process must reopen."""
        with _shared_guard:
            self.shared.generation += 1
            self.shared.damaged = None

    def _prune_damaged(self) -> None:
        kept = sorted(
            p
            for p in self.path.parent.glob(f"{self.path.name}.corrupt-*")
            if not p.name.endswith(("-wal", "-shm"))
        )
        for old in kept[:-KEEP_DAMAGED]:
            for suffix in ("", "-wal", "-shm"):
                with suppress(FileNotFoundError):
                    os.unlink(f"{old}{suffix}")

    def _record_repairs(self) -> None:
        pending = getattr(self, "_pending_repairs", [])
        if pending:
            done = json.loads(self.get_kv(REPAIRS_KEY) or "[]")
            self.set_kv(REPAIRS_KEY, json.dumps([*done, *pending][-20:]))
            self._pending_repairs = []

    def repairs(self) -> list[str]:
        """What happened to this home's index: one line per damaged file moved aside."""
        return [str(r) for r in json.loads(self.get_kv(REPAIRS_KEY) or "[]")]

    def note_damage(self, exc: BaseException) -> None:
        """Remember that SQLite found this file damaged (not if another connection replaced it since)."""
        if self.generation == self.shared.generation:
            self.shared.damaged = _describe(exc)

    def needs_repair(self) -> bool:
        """True when SQLite reported damage on a connection to this file, or another connection
        of this process replaced the file (this one must reopen)."""
        return self.shared.damaged is not None or self.generation != self.shared.generation

    def repair(self) -> None:
        """Reopen: move the file aside first if it is damaged (outside a transaction only)."""
        damaged = self.shared.damaged
        self._close_quietly()
        if damaged is not None and self.generation == self.shared.generation:
            self._move_aside(damaged, self._ino)
        self._open()

    def _load_sqlite_vec(self) -> bool:
        """Load sqlite-vec when the ``[vector]`` extra is installed; False otherwise."""
        # Found, not imported: the sqlite_vec package imports numpy, which a keyword-only CLI call
        # would pay for on every start (about a fifth of `coffer recall`). Its loadable_path() is
        # the package folder + "vec0".
        spec = importlib.util.find_spec("sqlite_vec")
        if spec is None or not spec.submodule_search_locations:
            return False
        self.conn.enable_load_extension(True)
        try:
            self.conn.load_extension(os.path.join(next(iter(spec.submodule_search_locations)), "vec0"))
        finally:
            self.conn.enable_load_extension(False)
        return True

    def _migrate(self) -> None:
        version = int(self.scalar("PRAGMA user_version") or 0)
        if version < SCHEMA_VERSION:
            with self.transaction():
                version = int(self.scalar("PRAGMA user_version") or 0)
                if version == 0:
                    self.conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                for number in range(version, SCHEMA_VERSION):
                    step = MIGRATIONS[number]
                    if isinstance(step, str):
                        self.conn.execute(step)
                    else:
                        step(self.conn)
                    self.conn.execute(f"PRAGMA user_version={number + 1}")
        self._record_repairs()

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
            with suppress(apsw.Error):  # a damaged file may refuse even the rollback
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _current(self) -> apsw.Connection:
        """The connection, reopened first when another connection of this process replaced the file."""
        if self.generation != self.shared.generation and self.conn.get_autocommit():
            self.repair()
        return self.conn

    def current(self) -> apsw.Connection:
        """The connection to read with, reopened first when another connection replaced the file."""
        return self._current()

    def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """All rows of a query."""
        conn = self._current()
        try:
            return list(conn.execute(sql, params))
        except DAMAGE as exc:  # met while stepping past the first row
            self.note_damage(exc)
            raise

    @contextmanager
    def cursor(self, sql: str, params: Any = ()) -> Iterator[apsw.Cursor]:
        """A query's rows as they come, for a caller that may stop early (the statement is closed
        on leaving, so no read transaction stays open)."""
        cursor = self._current().execute(sql, params)
        try:
            yield cursor
        except DAMAGE as exc:  # met while stepping past the first row
            self.note_damage(exc)
            raise
        finally:
            cursor.close()

    def scalar(self, sql: str, params: Any = ()) -> Any:
        """The first column of the first row, or ``None``."""
        for row in self.rows(sql, params):
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
        self.closed = True
        self.conn.close()

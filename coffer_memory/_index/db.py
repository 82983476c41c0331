"""Open the index database: pragmas, the numbered migrations (``migrations.py``), one connection per service.

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
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw

from .._errors import IndexUnavailable
from .._home import HomeLayout
from .._store.files import ensure_dir, move_aside
from .._store.lock import shared_lock, store_lock
from . import repair_history
from .migrations import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from .shape import read_schema_problem, schema_problem, schema_rows, vec_tables
from .shared_state import guard as _shared_guard
from .shared_state import shared_state as _shared_state
from .unusable import IndexBusy, unopenable
from .values import clash

log = logging.getLogger("coffer_memory._index")
KEEP_DAMAGED = 3
REPAIRS_KEY = "index_repairs"
DAMAGE = (apsw.CorruptError, apsw.NotADBError)
# Tables every schema version from 1 on has: one missing means a damaged index.
CORE_TABLES = frozenset({"documents", "chunks", "documents_fts", "store_state"})


MMAP_BYTES = 256 * 1024 * 1024


class _Connection(apsw.Connection):
    """An apsw connection that notes SQLite's corruption errors for the repair on the next read,
    and an ``SQLError`` or ``ConstraintError`` that comes of a schema another program changed
    (``shape.py``: a table replaced, a trigger or an index planted) too."""

    owner: IndexDB

    def execute(self, *args: Any, **kwargs: Any) -> apsw.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except DAMAGE as exc:
            self.owner.note_damage(exc)
            raise
        except (apsw.SQLError, apsw.ConstraintError) as exc:  # a planted trigger's RAISE is a ConstraintError
            self.owner.schema_changed(self, exc)
            raise

    def executemany(self, *args: Any, **kwargs: Any) -> apsw.Cursor:
        try:
            return super().executemany(*args, **kwargs)
        except DAMAGE as exc:
            self.owner.note_damage(exc)
            raise
        except (apsw.SQLError, apsw.ConstraintError) as exc:
            self.owner.schema_changed(self, exc)
            raise


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class IndexDB:
    """One apsw connection to ``index.db`` with WAL, a busy timeout and migrations applied.

    A damaged or foreign file found on open is moved aside and replaced (see the module doc).
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_ms: int = 10_000,
        home: Path | None = None,
        reader: bool = False,
        repair_lock: Path | None = None,
    ) -> None:
        ensure_dir(path.parent)
        self.path = path
        self.home = home if home is not None else path.parent  # documents' paths are relative to it
        self.repair_lock = repair_lock if repair_lock is not None else HomeLayout(self.home).index_repair_lock
        self.closed = False
        # A reader connection (``reader``) runs without SQLite's connection mutex
        # (``SQLITE_OPEN_NOMUTEX``: it was ~4% of a keyword recall's instructions). Nothing in
        # SQLite or apsw then stops two threads from stepping it at once, or ``close`` from
        # freeing it under a running statement, so every statement on it runs under ``busy``
        # (``rows``, ``cursor``, ``reading``, ``open``), and ``close_idle`` closes it only
        # while no other thread holds that. (The writer keeps the mutex: it is closed under a
        # call that holds the index lock too long, and apsw refuses that while a statement runs.)
        self.reader = reader
        self.busy = threading.RLock()
        self.busy_timeout_ms = busy_timeout_ms
        self.shared = _shared_state(path)
        self._holding = False  # counted in ``shared.holders``
        self._opening = False  # ``schema_changed`` leaves an open's own errors to the open
        self._reopen = False  # a repair's open failed: the connection is closed until one succeeds
        self._schema_version = 0  # ``PRAGMA schema_version`` when the shape was last found whole
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
        with self.busy:
            self._opening = True
            try:
                self._open_held()
            finally:
                self._opening = False

    def _open_held(self) -> None:
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        if self.reader:
            flags |= apsw.SQLITE_OPEN_NOMUTEX
        for _attempt in range(3):
            # Shared with other openers, never beside a move-aside (``_move_aside`` holds it
            # alone): renamed between this open's steps, the file was made anew after the
            # O_CREAT below and before its stat ("No such file"), or its -wal and -shm went
            # away while SQLite opened them (SQLITE_IOERR_FSTAT, said as "disk I/O error (is the
            # disk full?)"): tests/_index_race.py met both.
            with shared_lock(self.repair_lock):
                problem = self._open_once(flags)
            if problem is None:
                return
            self._move_aside(problem, self._ino)
        raise apsw.CantOpenError(f"{self.path} is damaged again after being replaced twice")

    def _open_once(self, flags: int) -> str | None:
        """Open, check, configure and migrate the file at the path: None when it is in use, else
        why it must be moved aside (the connection closed)."""
        if not self.path.exists():
            # It holds every fact's text: private like the files (SQLite gives -wal/-shm the same mode).
            try:
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass
            except OSError as exc:  # a folder the access check passed that refuses files (sysfs as root)
                raise IndexUnavailable("sqlite", f"cannot create {self.path}: {exc.strerror}") from None
        try:
            self._ino = os.stat(self.path).st_ino
        except OSError as exc:  # a link to a file that is not there (O_CREAT does not follow it)
            link = f" (a symbolic link to {os.readlink(self.path)})" if self.path.is_symlink() else ""
            raise IndexUnavailable("sqlite", f"cannot open {self.path}{link}: {exc.strerror}") from None
        self.generation = self.shared.generation
        try:
            self.conn = _Connection(str(self.path), flags=flags)
            self.conn.owner = self
            self._hold()
            self.conn.setbusytimeout(self.busy_timeout_ms)
            problem = self._foreign()  # before any pragma writes to a file that may not be ours
            if problem is None:
                self._configure()
                self._migrate()
                return None
        except DAMAGE as exc:
            problem = _describe(exc)
        except (apsw.IOError, apsw.FullError, apsw.CantOpenError) as exc:  # no room, or no file
            self._close_quietly()
            raise IndexUnavailable("sqlite", unopenable(self.path, exc)) from None
        self._close_quietly()
        return problem

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
            tables, objects = schema_rows(self.rows("SELECT type, name, tbl_name, sql FROM sqlite_master"))
            vec = vec_tables(self.conn) if "vec_stores" in tables else {}
            self._schema_version = int(self.scalar("PRAGMA schema_version") or 0)
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
        if not tables.keys() >= CORE_TABLES:
            return f"tables missing: {', '.join(sorted(CORE_TABLES - tables.keys()))}"
        return schema_problem(tables, version, vec, objects)

    def schema_problem(self, conn: apsw.Connection | None = None) -> str | None:
        """What another program changed in the schema of the open file (``shape.py``), or None.
        Read past ``_Connection``'s checks, on ``conn`` (default: this one's connection)."""
        return read_schema_problem(self.conn if conn is None else conn)

    def note_schema(self, conn: apsw.Connection | None = None) -> str | None:
        """Note a schema another program changed as damage, for the next read to move the file
        aside and rebuild it; returns what was wrong, or None. ``coffer doctor`` asks it."""
        problem = self.schema_problem(conn)
        if problem is not None and self.generation == self.shared.generation:
            self.shared.damaged = problem
        return problem

    def schema_changed(self, conn: apsw.Connection, failed: apsw.Error | None = None) -> None:
        """After an ``SQLError`` or ``ConstraintError`` on ``conn``: when the schema is no longer the index's, note it
        (``note_schema``) and raise ``IndexUnavailable`` saying so in the failed statement's place.
        A UNIQUE ``ConstraintError`` with the schema whole is noted the same way: rows that clash
        with what a file gives (``values.clash``). Nothing else: the error is the statement's own."""
        if self._opening:  # the open checks the schema itself, and moves a changed one aside
            return
        problem = self.note_schema(conn)
        if problem is None and isinstance(failed, apsw.ConstraintError):
            problem = clash(failed)
            if problem is not None and self.generation == self.shared.generation:
                self.shared.damaged = problem
        if problem is not None:
            raise IndexUnavailable(
                "sqlite",
                f"{self.path} was changed by another program ({problem}); "
                "it is rebuilt from the files on the next read",
            ) from None

    @property
    def file_id(self) -> int:
        """The file this connection was opened on (its inode: not reused while it is open)."""
        return self._ino

    def _hold(self) -> None:
        """Count this connection among the file's holders. The first one counts the file's size
        from now: with no connection of this process holding the old file, its inode may have
        been freed and given to a new file (``rm index.db`` and a rebuild, in one long-lived
        process), whose smaller size then looked like the old file cut short (the rebuild moved
        its own new index aside as damaged, three times in three of ``bench/limit.py``'s)."""
        if self._holding:
            return
        with _shared_guard:
            if self.shared.holders == 0:
                with suppress(OSError):
                    self.shared.seen = (self._ino, os.stat(self.path).st_size)
            self.shared.holders += 1
        self._holding = True

    def _let_go(self) -> None:
        if self._holding:
            self._holding = False
            with _shared_guard:
                self.shared.holders -= 1

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            with suppress(apsw.Error), self._closing():
                conn.close()
                self._let_go()

    def _closing(self) -> AbstractContextManager[None]:
        """Held around a close: the file's last connection checkpoints and deletes the -wal and
        -shm *by name*, and beside a move-aside (``_move_aside``) those names were the new file's.
        Its committed transactions were lost to every later connection while the ones open wrote
        on into the deleted -wal: the race harness's FTS5 "checksum mismatch" (integrity_check)."""
        return shared_lock(self.repair_lock)

    def _move_aside(self, problem: str, ino: int) -> None:
        """Rename the damaged file (and its -wal/-shm) away, unless another process did already."""
        with store_lock(self.repair_lock):
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
            repair_history.keep(self.path, f"{stamp}: {message}")
        self._pending_repairs = [*getattr(self, "_pending_repairs", []), f"{stamp}: {message}"]
        log.warning("index %s is damaged (%s): rebuilding from the files", self.path, message)

    def _replaced(self) -> None:
        """The file at ``path`` is a new one: every connection of this process must reopen."""
        with _shared_guard:
            self.shared.generation += 1
            self.shared.damaged = None
            self.shared.seen = (0, 0)

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
            self.set_kv(REPAIRS_KEY, json.dumps([*done, *pending][-repair_history.KEEP :]))
            self._pending_repairs = []

    def repairs(self) -> list[str]:
        """What happened to this home's index: one line per damaged file moved aside, oldest first
        (the history beside the index, with what the index noted before it was kept there)."""
        return repair_history.merged(
            self.path, [str(r) for r in json.loads(self.get_kv(REPAIRS_KEY) or "[]")]
        )

    def note_damage(self, exc: BaseException) -> None:
        """Remember that SQLite found this file damaged (not if another connection replaced it since)."""
        if self.generation == self.shared.generation:
            self.shared.damaged = _describe(exc)

    def needs_repair(self, check_size: bool = True) -> bool:
        """True when SQLite reported damage on a connection to this file, another program cut
        it short, or another connection of this process replaced the file (this one must reopen).
        ``check_size`` False: the caller's read checked the size a moment ago (``_store/looks.py``)."""
        if self._reopen:
            return True
        if check_size:
            with self.busy:  # a reader's, asked beside a background scan (``fresh_beside_scan``)
                self._check_size()
        return self.shared.damaged is not None or self.generation != self.shared.generation

    def _check_size(self) -> bool:
        """Take a file cut short under this process for damage (outside a transaction); True then.
        True too when the file at the path is no longer this connection's (deleted, moved aside
        or replaced by another program): every connection of this process reopens, where this
        one wrote on into a file nobody else reads and its readers opened the new one."""
        if self.generation == self.shared.generation and self.conn.get_autocommit():
            try:
                st: os.stat_result | None = os.stat(self.path)
            except FileNotFoundError:
                st = None
            except OSError:
                return False
            if st is None or st.st_ino != self._ino:  # it holds the file: its inode is not reused
                self._replaced()
                return True
            size = self._cut_short(st)
            if size is not None:
                self.shared.damaged = f"the file was cut short to {size} bytes while in use"
                return True
        return False

    def repair(self) -> None:
        """Reopen: move the file aside first if it is damaged (outside a transaction only)."""
        damaged = self.shared.damaged
        # Closing a connection to a file another process moved aside leaves the new file's -wal
        # and -shm at the path alone: SQLite's close checkpoints and deletes them by name only
        # when its database file has not moved (``databaseIsUnmoved`` in pager.c).
        self._close_quietly()
        # Until the open below succeeds the connection is closed: a long-lived reader whose reopen
        # failed once answered ConnectionClosedError to every call after it, until restarted.
        self._reopen = True
        if damaged is not None and self.generation == self.shared.generation:
            self._move_aside(damaged, self._ino)
        self._open()
        self._reopen = False

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
        try:
            self._current().execute("BEGIN IMMEDIATE")
        except apsw.BusyError as exc:
            raise IndexBusy(self.path, self.busy_timeout_ms) from exc
        try:
            self._check_schema_version()
            yield self.conn
        except BaseException:
            with suppress(apsw.Error):  # a damaged file may refuse even the rollback
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _check_schema_version(self) -> None:
        """In a write transaction: when the schema changed since its shape was last found whole
        (``PRAGMA schema_version``, one read of the header this transaction holds), check it again
        (``schema_changed``: ``IndexUnavailable`` when another program changed it). A trigger that
        answers ``RAISE(IGNORE)``, planted after this process's open checked the schema, fails no
        statement: it dropped the writes without a word until doctor or the next process looked.
        Reads are left alone (a trigger acts on writes only): keyword recall pays nothing."""
        version = int(self.scalar("PRAGMA schema_version") or 0)
        if version != self._schema_version and not self._opening:
            self.schema_changed(self.conn)  # raises when the shape is wrong
            self._schema_version = version

    def _current(self, sized: bool = False) -> apsw.Connection:
        """The connection, reopened first when another connection of this process replaced the
        file, or after moving the file aside when another program cut it short (``sized``: the
        caller's read checked the file's size a moment ago, see ``_store/looks.py``)."""
        if (self._reopen and not self._opening) or (
            self.conn.get_autocommit()
            and ((not sized and self._check_size()) or self.generation != self.shared.generation)
        ):
            self.repair()
        return self.conn

    def _cut_short(self, st: os.stat_result) -> int | None:
        """The file's size when it shrank under this process, else None. SQLite never shrinks it
        (no VACUUM here), and it is memory-mapped: a read of a page past a new end is SIGBUS, the
        process's death (a server's, with every client), where a read call finds damage instead.
        ``st``: the file's stat, of the inode this connection opened."""
        ino, size = self.shared.seen
        if ino != st.st_ino or st.st_size >= size:  # another process's new file counts from its size
            self.shared.seen = (st.st_ino, st.st_size)
            return None
        return st.st_size

    def current(self, sized: bool = False) -> apsw.Connection:
        """The connection to read with, reopened first when another connection replaced the file
        (``sized``: see ``_current``)."""
        return self._current(sized)

    def rows(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """All rows of a query."""
        with self.busy:
            conn = self._current()
            try:
                return list(conn.execute(sql, params))
            except DAMAGE as exc:  # met while stepping past the first row
                self.note_damage(exc)
                raise

    def cursor(self, sql: str, params: Any = ()) -> _Rows:
        """A query's rows as they come, for a caller that may stop early (the statement is closed
        on leaving, so no read transaction stays open; ``busy`` is held until then)."""
        busy = self.busy
        busy.acquire()
        try:
            return _Rows(self, self._current().execute(sql, params))
        except BaseException:
            busy.release()
            raise

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
        with self.busy:  # a reader's too: a failed embedding's back-off (``vec.py``)
            self.conn.execute(
                "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def close(self) -> None:
        """Close the connection (apsw refuses the writer's while another thread is inside one of
        its statements: then it stays open, and ``closed`` false). A reader's: ``close_idle``."""
        with self._closing():
            self.conn.close()
        self._let_go()
        self.closed = True

    def close_idle(self) -> bool:
        """Close the connection unless another thread holds ``busy`` (it is stepping a statement,
        or inside a read transaction): then it stays open, and the answer is False."""
        if not self.busy.acquire(blocking=False):
            return False
        try:
            self.close()
        finally:
            self.busy.release()
        return True


class _Rows:
    """``IndexDB.cursor``'s context: the cursor, closed on leaving; damage met while stepping is
    noted. A class, not a ``contextmanager`` generator: each keyword recall steps one."""

    __slots__ = ("_cursor", "_db")

    def __init__(self, db: IndexDB, cursor: apsw.Cursor) -> None:
        self._db = db
        self._cursor = cursor

    def __enter__(self) -> apsw.Cursor:
        return self._cursor

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            if isinstance(exc, DAMAGE):  # met while stepping past the first row
                self._db.note_damage(exc)
            self._cursor.close()
        finally:
            self._db.busy.release()

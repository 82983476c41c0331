"""``PostgresIndex``: documents and chunks in PostgreSQL, words through tsvector/GIN, vectors
through pgvector.

Words: every chunk's text as the SQLite word index sees it (``index.cjk.index_text``: CJK runs
as bigrams and characters), in a tsvector of the ``english`` configuration (stemmed like
SQLite's porter tokenizer). A query asks for any of its ``keyword_terms``. When no word
matches (a fragment of a word), a substring scan answers, indexed by pg_trgm when the
extension is there.

Vectors: when the ``vector`` extension is there (or may be created), each document's vectors,
as the machine-local index computed them, are kept beside its chunks per embedding model, and
``vectors`` is True: vector recall (and hybrid's vector half) asks ``nearest``. Without the
extension ``vectors`` is False and vectors stay in each machine's local index.

Writes to one store serialise across processes and hosts on a session advisory lock held for
the whole write transaction, which the Writer asks is still held (``check_lock``) right before
each file change is made durable; syncs are idempotent by content hash. The database follows one
memory folder (``binding``): another home's folder is refused before it pushes or removes rows.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from ..._errors import IndexUnavailable
from ...plugins.hookspecs import BackendHit, IndexedDoc, Vector
from ..chunking import MAX_WINDOWS
from ..cjk import index_text
from . import vectors as vec
from . import words
from .binding import bind, same_folder
from .deadline import DEFAULT_TIMEOUT, TimedOut, bounded, connection_options
from .failures import DOWN, GONE, REFUSED, first_line, silent, start_outage
from .reach import POOL_TIMEOUT, Reaching, reachable, retried
from .redact import refuse_ambiguous, scrub, unreadable
from .schema import (
    CURRENT_VERSION,
    MIN_SERVER_VERSION,
    SCHEMA_VERSION,
    TS_CONFIG,
    SchemaTooNew,
    migrate,
    too_old,
)
from .text import searched_form, storable, with_parts
from .words import CHUNKS_PER_DOC

# A sync of at least this many documents refreshes the planner's statistics at once (autovacuum
# would, later: until then a filled table is planned as if empty).
ANALYZE_AFTER = 1000
Conn = vec.Conn
Only = vec.Only
_LOCK_KEY = "SELECT hashtextextended('coffer-store:' || %s, 0)"
# Seconds between tries for a store's lock that another writer holds (``_lock``).
LOCK_POLL_SECONDS = 0.2


class _Held:
    """A store's advisory lock: the connection holding it, its key, and how deep this thread entered."""

    def __init__(self, conn: psycopg.Connection[Any], key: int, owner: int) -> None:
        self.conn = conn
        self.key = key
        self.owner = owner
        self.depth = 1


class PostgresIndex(Reaching):
    """The ``postgresql`` index backend (see the module docstring)."""

    name = "postgresql"
    vectors = False

    @reachable
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        memory_dir: Path | None = None,
        min_server_version: int = MIN_SERVER_VERSION,
        vectors_wanted: bool = True,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        # One direct connection first: a server that refuses, or is older than the index needs
        # (``min_server_version``, a ``server_version_num``), is said at once, where the pool
        # would retry until its timeout and an old server would fail a statement in the middle.
        self._url = url
        self._vectors_wanted = vectors_wanted  # a missing pgvector is a warning only then

        self.timeout = timeout
        try:
            given = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError:  # libpq could not read the URL: the user's typo
            raise unreadable(url) from None
        refuse_ambiguous(url, given)
        # The URL's own connect_timeout (and keepalives), when it sets them, are what the pool
        # will use too: a bad value is said here, at once, not after the pool's 10 s of failed
        # reconnections. Else ``timeout`` bounds the connecting (``deadline``).
        options = connection_options(given, timeout)
        # A start that found the server down (or not answering) tells the next ones at once.
        starting = start_outage(url)
        starting.check()
        try:
            with psycopg.connect(url, autocommit=True, **options) as first, bounded(first, timeout):
                old = too_old(first, min_server_version)
        except psycopg.ProgrammingError:
            raise unreadable(url) from None
        except (*DOWN, TimedOut) as exc:
            said = (
                IndexUnavailable(
                    "postgresql", f"the server did not answer within {timeout:g} s ([index] timeout_seconds)"
                )
                if isinstance(exc, TimedOut)
                else self._said(exc)
            )
            starting.begin(said.reason, silent=isinstance(exc, TimedOut) or silent(exc))
            raise said from None
        if old is not None:
            raise IndexUnavailable("postgresql", old)
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(2, pool_size),
            open=False,
            kwargs={"autocommit": True, **options},
            timeout=POOL_TIMEOUT,
            # Reconnecting gives up as soon as a request would: the next request starts again at
            # once, where the pool's doubling delays let a server back after a minute's outage
            # wait half a minute more before the first request that found it.
            reconnect_timeout=POOL_TIMEOUT,
        )
        self.pool.open(wait=True, timeout=30)
        self._reach(url)
        try:
            # Not bounded: a migration may build an index on a large table (the first connection
            # above found the server answering).
            with self.pool.connection() as conn:
                found = migrate(conn, vectors_wanted=vectors_wanted)
                # Before anything is pushed or removed: this home's folder must be the one the
                # database follows (``binding``). ``memory_dir`` None: a caller that never syncs.
                folder = bind(conn, memory_dir, writable=found.writable) if memory_dir else None
                # HNSW indexes only where filtered scans can be iterative (see ``vectors``).
                self._iterative = found.vectors and vec.version(conn) >= vec.ITERATIVE_SINCE
        except SchemaTooNew as exc:
            self.pool.close()
            raise IndexUnavailable("postgresql", str(exc)) from None
        except BaseException:
            self.pool.close()  # its threads and connections would outlive the failed start
            raise
        self.trigram = found.trigram
        self.memory_dir = memory_dir
        self.folder_id = folder
        self.vectors = found.vectors
        self.writable = found.writable
        self._role = found.role
        self._held: dict[str, _Held] = {}
        self._guard = threading.Lock()
        self._indexed: set[tuple[str, int]] = set()  # (model, width) whose HNSW index is settled
        self._builds: dict[tuple[str, int], threading.Thread] = {}  # HNSW builds under way here
        self._iterating: weakref.WeakSet[Conn] = weakref.WeakSet()  # connections told to iterate
        # How many times the tables were made again while this process ran: the mirror compares
        # every store anew (and so pushes every document) when it changes.
        self.generation = 0

    def recreate(self) -> None:
        """Create the tables again after they were dropped while this process ran (to rebuild the
        index from the files, or by mistake), and bind the database to this folder again; the
        next read of each store pushes its documents (``generation``)."""
        with self._pooled() as conn:
            found = migrate(conn, vectors_wanted=self._vectors_wanted)
            self.folder_id = bind(conn, self.memory_dir, writable=found.writable) if self.memory_dir else None
        vec.log.warning("coffer's tables were gone from the database: created again, filled from the files")
        with self._guard:
            self.trigram, self.vectors, self.writable = found.trigram, found.vectors, found.writable
            self._indexed.clear()  # the HNSW indexes went with the table
            self.generation += 1

    # -- locking ----------------------------------------------------------------------------
    @contextmanager
    def write_lock(self, store: str) -> Iterator[None]:
        """Hold ``pg_advisory_lock`` of the store on one connection until the block ends."""
        me = threading.get_ident()
        with self._guard:
            held = self._held.get(store)
            again = held is not None and held.owner == me
            if held is not None and again:
                held.depth += 1
        if held is not None and again:  # a session lock is re-entrant only on its own connection
            try:
                yield
            finally:
                held.depth -= 1
            return
        if not self.writable:  # said before the write touches a file, like the server being down
            raise IndexUnavailable(
                "postgresql",
                f"role {self._role!r} may only read this database (writes need INSERT, UPDATE and "
                "DELETE on the coffer_ tables: see docs/team.md, 'Roles')",
            )
        self._own_folder()
        self.outage.check()  # the server known to be down: said at once, before a file is touched
        with ExitStack() as stack:
            try:  # the server being down is said before the write touches a file
                try:
                    conn, key = self.retrying()(self._lock, store)
                except GONE:
                    self.recreate()
                    conn, key = self.retrying()(self._lock, store)
            except REFUSED as exc:
                raise self.unavailable(exc) from None
            except SchemaTooNew as exc:  # a newer coffer migrated the database since this one started
                raise IndexUnavailable("postgresql", str(exc)) from None
            stack.callback(self.pool.putconn, conn)
            with self._guard:
                self._held[store] = _Held(conn, key, me)
            try:
                yield
            finally:
                with self._guard:
                    del self._held[store]
                # The session ended (the server released its locks with it), or the server does
                # not answer (the connection is cut: its session, and the lock, end with it).
                with suppress(*DOWN, IndexUnavailable), self._bounded(conn):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _own_folder(self) -> None:
        """``IndexFolderMismatch`` when this home's memory folder is no longer the one the database
        follows (its link re-pointed, or the share behind it unmounted, since the start)."""
        if self.memory_dir is not None and self.folder_id is not None:
            same_folder(self.memory_dir, self.folder_id)

    def check_lock(self, store: str) -> None:
        """``IndexUnavailable`` when the advisory lock this thread took on ``store`` is lost (its
        session ended: the server restarted, an administrator or a proxy ended it). The Writer asks
        right before a file is made durable: another process may hold the lock by now, so the
        write is not made (nothing half-written, the file not replaced). Nothing when this thread
        holds no lock of the store here."""
        with self._guard:
            held = self._held.get(store)
        if held is None or held.owner != threading.get_ident():
            return
        high, low = (held.key >> 32) & 0xFFFFFFFF, held.key & 0xFFFFFFFF  # how pg_locks shows a bigint key
        try:
            with bounded(held.conn, self.timeout):
                row = held.conn.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                    "pid = pg_backend_pid() AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1)",
                    (high, low),
                ).fetchone()
            why = None if row is not None and row[0] else "its session no longer holds it"
        except psycopg.Error as exc:  # the connection is gone, and the lock went with its session
            why = f"its connection ended: {scrub(first_line(exc), self._url)}"
        except TimedOut:  # cut: its session, and the lock, end with it
            why = f"the server did not answer within {self.timeout:g} s"
        if why is not None:
            raise IndexUnavailable(
                "postgresql",
                f"the write lock of store {store!r} was lost ({why}); nothing was written: try again",
            )

    def _lock(self, store: str) -> tuple[psycopg.Connection[Any], int]:
        """A pooled connection holding the store's advisory lock, and the lock's key.

        The lock is asked for with ``pg_try_advisory_lock``, each try within the deadline
        (``_bounded``), until it is had: another writer may rightly hold it for minutes (a bulk
        push), and a blocking ``pg_advisory_lock`` under the deadline was cut as a server that
        did not answer; a server that stops answering is still told at the try it hangs in."""
        conn = self._getconn()
        try:
            with self._bounded(conn):
                (key,) = conn.execute(_LOCK_KEY, (store,)).fetchone() or (0,)
            for wait in itertools.chain((0.01, 0.02, 0.05, 0.1), itertools.repeat(LOCK_POLL_SECONDS)):
                with self._bounded(conn):
                    row = conn.execute(
                        f"SELECT pg_try_advisory_lock(%s), {CURRENT_VERSION}", (key,)
                    ).fetchone()
                if row is not None and row[0]:
                    break
                time.sleep(wait)
            current = int(row[1]) if row is not None and row[1] is not None else SCHEMA_VERSION
            if current > SCHEMA_VERSION:
                with self._bounded(conn):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                raise SchemaTooNew(current)
        except BaseException:
            self.pool.putconn(conn)
            raise
        return conn, int(key)

    @contextmanager
    def _connection(self, store: str, items: int = 0) -> Iterator[psycopg.Connection[Any]]:
        """The connection holding the store's lock in this thread, else one from the pool; used
        within its deadline (``_bounded``: ``items``, the documents a bulk push sends)."""
        with self._guard:
            held = self._held.get(store)
        if held is not None and held.owner == threading.get_ident():
            with self._bounded(held.conn, items):
                yield held.conn
            return
        with self._pooled(items) as conn:
            yield conn

    # -- writing ----------------------------------------------------------------------------
    @reachable
    def sync(self, store: str, docs: Sequence[IndexedDoc], removed: Sequence[str]) -> int:
        """Upsert changed ``docs``, drop ``removed``; the store's version after (see IndexBackend)."""
        version = self._sync(store, docs, removed)
        if len(docs) >= ANALYZE_AFTER:  # a bulk fill: plan the next queries on fresh statistics
            with self._connection(store, len(docs)) as conn:
                conn.execute(
                    "ANALYZE coffer_documents, coffer_chunks" + (", coffer_vectors" if self.vectors else "")
                )
        return version

    def _sync(self, store: str, docs: Sequence[IndexedDoc], removed: Sequence[str]) -> int:
        with self._connection(store, len(docs) + len(removed)) as conn, conn.transaction():
            known = dict(
                conn.execute(
                    "SELECT path, sha256 FROM coffer_documents WHERE store = %s AND path = ANY(%s)",
                    (store, [d.path for d in docs]),
                ).fetchall()
            )
            fresh = [d for d in docs if known.get(d.path) != d.sha256]
            # Unchanged content whose vectors of this model are not here yet (another host pushed
            # the text, or vectors came on later): the vectors alone are added.
            unembedded = self._unembedded(conn, store, [d for d in docs if known.get(d.path) == d.sha256])
            gone = [*removed, *(d.path for d in fresh if d.path in known)]
            dropped = 0
            if gone:  # a document's vectors go with it (ON DELETE CASCADE)
                cur = conn.execute(
                    "DELETE FROM coffer_documents WHERE store = %s AND path = ANY(%s)", (store, gone)
                )
                dropped = cur.rowcount
            if fresh:
                self._insert(conn, store, fresh)
            added = vec.insert(conn, store, [*fresh, *unembedded]) if self.vectors else 0
            if not fresh and not dropped and not added:
                return self._version(conn, store)
            row = conn.execute(
                "INSERT INTO coffer_stores (name, version) VALUES (%s, 1) ON CONFLICT (name) "
                "DO UPDATE SET version = coffer_stores.version + 1 RETURNING version",
                (store,),
            ).fetchone()
            return int(row[0]) if row else 0

    def _unembedded(self, conn: Conn, store: str, docs: Sequence[IndexedDoc]) -> list[IndexedDoc]:
        """Those of ``docs`` carrying vectors of a model the database lacks for them."""
        carrying = [d for d in docs if d.vectors is not None and d.vectors.rows]
        if not self.vectors or not carrying:
            return []
        have = vec.embedded(conn, store, [d.path for d in carrying])
        return [d for d in carrying if d.vectors is not None and (d.path, d.vectors.model) not in have]

    def _insert(self, conn: psycopg.Connection[Any], store: str, docs: Sequence[IndexedDoc]) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO coffer_documents (store, path, id, sha256, title, description, created_at, "
                "updated_at, tags) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        store,
                        d.path,
                        storable(d.id),
                        d.sha256,
                        storable(d.title),
                        storable(d.description),
                        d.created_at,
                        d.updated_at,
                        [storable(tag) for tag in d.tags],
                    )
                    for d in docs
                ],
            )
            cur.executemany(
                "INSERT INTO coffer_chunks (store, path, position, text, words, searched) "
                f"VALUES (%s, %s, %s, %s, to_tsvector('{TS_CONFIG}', %s), %s)",
                [
                    (store, d.path, position, clean, index_text(with_parts(clean)), searched_form(clean))
                    for d in docs
                    for position, clean in enumerate(map(storable, d.chunks))
                ],
            )

    @reachable
    def drop_store(self, store: str) -> None:
        """Forget every row of ``store`` (its folder is gone: not because the folder was swapped).

        The delete gets a deadline by the store's documents, as a bulk push does (``_bounded``):
        under one ``[index] timeout_seconds``, a large store's delete was cut every time, and
        the store's rows stayed for good (review16)."""
        self._own_folder()
        with self._connection(store) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM coffer_documents WHERE store = %s", (store,)
            ).fetchone() or (0,)
        with self._connection(store, int(count)) as conn, conn.transaction():
            conn.execute("DELETE FROM coffer_documents WHERE store = %s", (store,))
            conn.execute("DELETE FROM coffer_stores WHERE name = %s", (store,))

    # -- reading ----------------------------------------------------------------------------
    @retried
    def digests(self, store: str, model: str | None = None) -> dict[str, str]:
        """path -> sha256 of every document of ``store``; with ``model``, ``""`` for a document
        holding no vectors of that model."""
        with self._pooled() as conn:
            if model is None or not self.vectors:
                rows = conn.execute("SELECT path, sha256 FROM coffer_documents WHERE store = %s", (store,))
            else:
                rows = conn.execute(
                    "SELECT d.path, CASE WHEN EXISTS (SELECT 1 FROM coffer_vectors v WHERE v.store = d.store "
                    "AND v.path = d.path AND v.model = %s) THEN d.sha256 ELSE '' END "
                    "FROM coffer_documents d WHERE d.store = %s",
                    (model, store),
                )
            return {str(p): str(s) for p, s in rows.fetchall()}

    @retried
    def version(self, store: str) -> int:
        """How many syncs changed ``store``."""
        with self._pooled() as conn:
            return self._version(conn, store)

    @staticmethod
    def _version(conn: psycopg.Connection[Any], store: str) -> int:
        row = conn.execute("SELECT version FROM coffer_stores WHERE name = %s", (store,)).fetchone()
        return int(row[0]) if row else 0

    @retried
    def search(
        self,
        stores: Sequence[str],
        query: str,
        limit: int,
        *,
        tags: Sequence[str] = (),
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, list[BackendHit]]:
        """Best documents per store: words first, then substrings (see the module docstring)."""
        only = self._filter(tags, since, until)
        out: dict[str, list[BackendHit]] = {}
        with self._pooled() as conn:
            for store in dict.fromkeys(stores):
                out[store] = words.search(conn, store, query, limit, only)
        return out

    @retried
    def nearest(
        self,
        stores: Sequence[str],
        vector: Vector,
        model: str,
        limit: int,
        *,
        tags: Sequence[str] = (),
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, list[BackendHit]]:
        """Best documents per store by cosine distance among ``model``'s vectors (see the module
        docstring); nothing without the extension."""
        only = self._filter(tags, since, until)
        query = vec.floats(vector)
        out: dict[str, list[BackendHit]] = {}
        with self._pooled() as conn:
            for store in dict.fromkeys(stores):
                out[store] = self._nearest(conn, store, query, model, limit, only) if self.vectors else []
        return out

    def _nearest(
        self, conn: Conn, store: str, query: list[float], model: str, limit: int, only: Only
    ) -> list[BackendHit]:
        if self._iterative:
            if (model, len(query)) not in self._indexed:
                self._build_index(model, len(query))
            if conn not in self._iterating:
                vec.iterate(conn)
                with self._guard:
                    self._iterating.add(conn)
        # A long chunk has a vector per window, so ``k`` rows may hold fewer than ``limit``
        # documents: then ask once more for enough rows whatever the windows (as on SQLite).
        hits: list[BackendHit] = []
        for k in (limit * CHUNKS_PER_DOC, limit * CHUNKS_PER_DOC * MAX_WINDOWS):
            rows = vec.nearest_chunks(conn, store, query, model, k, only)
            hits = words.best(rows, limit)
            if len(hits) == limit or len(rows) < k:
                break
        return hits

    def _build_index(self, model: str, width: int) -> None:
        """Build the HNSW index of (model, width) on a thread of its own: the first search of a
        model must not wait for it (minutes at 100k vectors); searches scan exactly meanwhile."""
        key = (model, width)
        with self._guard:
            if key in self._indexed or key in self._builds:
                return
            thread = threading.Thread(target=self._build, args=key, name="coffer-hnsw-build", daemon=True)
            self._builds[key] = thread
        thread.start()

    def _build(self, model: str, width: int) -> None:
        settled = False
        try:
            with self._pooled(bounded=False) as conn:  # minutes at 100k vectors, on its own thread
                settled = vec.ensure_index(conn, model, width)
        except psycopg.Error as exc:  # the pool closed (PoolClosed) or the server went away
            vec.log.warning("HNSW index of %s not built (%s); searches scan every vector", model, exc)
        finally:
            with self._guard:
                if settled:
                    self._indexed.add((model, width))
                self._builds.pop((model, width), None)

    def wait_for_indexes(self, timeout: float | None = None) -> None:
        """Wait for the HNSW builds this process started (tests, benchmarks, a warm-up)."""
        with self._guard:
            builds = list(self._builds.values())
        for thread in builds:
            thread.join(timeout)

    @staticmethod
    def _filter(
        tags: Sequence[str], since: datetime | None, until: datetime | None
    ) -> tuple[str, list[object]]:
        parts: list[str] = []
        params: list[object] = []
        if tags:
            parts.append(" AND d.tags @> %s")
            params.append(list(tags))
        if since is not None:
            parts.append(" AND d.updated_at >= %s")
            params.append(since)
        if until is not None:
            parts.append(" AND d.updated_at < %s")
            params.append(until)
        return "".join(parts), params

    def close(self) -> None:
        """Close the pool (its connections release any advisory lock they held) and stop asking
        whether a server that was down is back."""
        self.outage.close()
        self.pool.close()

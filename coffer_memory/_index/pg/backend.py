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

import functools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_chain, wait_fixed, wait_none

from ..._errors import IndexUnavailable
from ...plugins.hookspecs import BackendHit, IndexedDoc, Vector
from ..chunking import MAX_WINDOWS
from ..cjk import index_text
from ..fts import keyword_terms, plan_query
from . import vectors as vec
from .binding import bind, same_folder
from .failures import DOWN, GONE, REFUSED, Outage, first_line, transient, unavailable
from .near import near_rows
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
from .text import advised, escape_like, storable, tsquery_terms, with_parts

# Chunks read per document wanted: a document's best chunk is usually among them.
CHUNKS_PER_DOC = 4
# A sync of at least this many documents refreshes the planner's statistics at once (autovacuum
# would, later: until then a filled table is planned as if empty).
ANALYZE_AFTER = 1000
Conn = vec.Conn
Only = vec.Only
_LOCK_KEY = "SELECT hashtextextended('coffer-store:' || %s, 0)"


P = ParamSpec("P")
R = TypeVar("R")
# A read (or a write's lock) whose connection broke (the server restarted, or ended the session)
# is asked again at once on a fresh connection, then twice more over 1.5 s: long enough for a
# restart on a quiet server. Connections are not checked as they leave the pool (a round trip on
# every request: 5-81% of a keyword recall, ``bench/pg.py --check-sizes``); after a failure the
# pool's idle connections are checked, so the next try does not meet another ended one.
READ_ATTEMPTS = 4
# Seconds a request waits for a pooled connection before the server is said to be down.
POOL_TIMEOUT = 10.0


def _reachable(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` with the server being down or unreachable, or refusing the role, reported as
    ``IndexUnavailable``, a typed error every face answers (REST 503), instead of the driver's
    exception."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        index = args[0]
        outage = getattr(index, "outage", None)
        if isinstance(outage, Outage):  # the server known to be down: said at once
            outage.check()
        try:
            try:
                return method(*args, **kwargs)
            except GONE:  # the tables were dropped (to rebuild the index): made again, asked again
                if not isinstance(index, PostgresIndex) or not hasattr(index, "pool"):
                    raise
                index.recreate()
                return method(*args, **kwargs)
        except REFUSED as exc:
            raise (index.unavailable(exc) if isinstance(index, PostgresIndex) else unavailable(exc)) from None

    return wrapper


def _retried(method: Callable[P, R]) -> Callable[P, R]:
    """A read (``_reachable``) tried again on a broken connection (see ``READ_ATTEMPTS``)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        index = args[0]
        assert isinstance(index, PostgresIndex)
        return index.retrying()(method, *args, **kwargs)

    return _reachable(wrapper)


class _Held:
    """A store's advisory lock: the connection holding it, its key, and how deep this thread entered."""

    def __init__(self, conn: psycopg.Connection[Any], key: int, owner: int) -> None:
        self.conn = conn
        self.key = key
        self.owner = owner
        self.depth = 1


class PostgresIndex:
    """The ``postgresql`` index backend (see the module docstring)."""

    name = "postgresql"
    vectors = False

    @_reachable
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 4,
        memory_dir: Path | None = None,
        min_server_version: int = MIN_SERVER_VERSION,
    ) -> None:
        # One direct connection first: a server that refuses, or is older than the index needs
        # (``min_server_version``, a ``server_version_num``), is said at once, where the pool
        # would retry until its timeout and an old server would fail a statement in the middle.
        self._url = url
        try:
            given = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError:  # libpq could not read the URL: the user's typo
            raise unreadable(url) from None
        refuse_ambiguous(url, given)
        # The URL's own connect_timeout, when it sets one, is what the pool will use too: a
        # bad value is said here, at once, not after the pool's 10 s of failed reconnections.
        timeout: dict[str, Any] = {} if "connect_timeout" in given else {"connect_timeout": 10}
        try:
            with psycopg.connect(url, autocommit=True, **timeout) as first:
                old = too_old(first, min_server_version)
        except psycopg.ProgrammingError:
            raise unreadable(url) from None
        if old is not None:
            raise IndexUnavailable("postgresql", old)
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            min_size=1,
            max_size=max(2, pool_size),
            open=False,
            kwargs={"autocommit": True},
            timeout=POOL_TIMEOUT,
            # Reconnecting gives up as soon as a request would: the next request starts again at
            # once, where the pool's doubling delays let a server back after a minute's outage
            # wait half a minute more before the first request that found it.
            reconnect_timeout=POOL_TIMEOUT,
        )
        self.pool.open(wait=True, timeout=30)
        self.outage = Outage(self._probe, self.pool.check)
        try:
            with self.pool.connection() as conn:
                found = migrate(conn)
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
        with self.pool.connection() as conn:
            found = migrate(conn)
            self.folder_id = bind(conn, self.memory_dir, writable=found.writable) if self.memory_dir else None
        vec.log.warning("coffer's tables were gone from the database: created again, filled from the files")
        with self._guard:
            self.trigram, self.vectors, self.writable = found.trigram, found.vectors, found.writable
            self._indexed.clear()  # the HNSW indexes went with the table
            self.generation += 1

    def retrying(self) -> Retrying:
        """Tries of a statement on a connection that may have broken (see ``READ_ATTEMPTS``)."""
        return Retrying(
            stop=stop_after_attempt(READ_ATTEMPTS),
            wait=wait_chain(wait_none(), wait_fixed(0.5), wait_fixed(1.0)),
            retry=retry_if_exception(transient),
            before_sleep=lambda _: self.pool.check(),
            reraise=True,
        )

    def unavailable(self, exc: BaseException) -> IndexUnavailable:
        """The typed error for the driver's ``exc``. When the pool gave no connection in time (or
        a connection broke), it says why: the server's refusal when a direct connection fails
        too, and then every request is told so at once (``outage``) until the server is back;
        else every pooled connection being busy (the pool's own message says neither)."""
        outage: Outage | None = getattr(self, "outage", None)  # None: the start's own connection failed
        if not isinstance(exc, PoolTimeout) and (outage is None or not transient(exc)):
            return self._said(exc)
        try:
            self._probe()
        except psycopg.Error as refused:
            said = self._said(refused)
            if outage is not None:
                outage.begin(said.reason)
            return said
        if not isinstance(exc, PoolTimeout):
            return self._said(exc)
        return IndexUnavailable(
            "postgresql",
            f"no pooled connection within {POOL_TIMEOUT:g} s though the server accepts connections "
            "(every one busy: raise [index] pool_size or the server's max_connections; or the pool "
            "still reconnecting after the server ended its sessions)",
        )

    def _probe(self) -> None:
        """One direct connection, closed at once: ``psycopg.Error`` while the server refuses."""
        psycopg.connect(self._url, connect_timeout=5).close()

    def _said(self, exc: BaseException) -> IndexUnavailable:
        """``exc``'s first line as ``IndexUnavailable``, never with the URL's password in it."""
        return IndexUnavailable("postgresql", advised(scrub(first_line(exc), getattr(self, "_url", ""))))

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
                with suppress(*DOWN):  # the session ended, and the server released its locks with it
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
            row = held.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND "
                "pid = pg_backend_pid() AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 1)",
                (high, low),
            ).fetchone()
            why = None if row is not None and row[0] else "its session no longer holds it"
        except psycopg.Error as exc:  # the connection is gone, and the lock went with its session
            why = f"its connection ended: {scrub(first_line(exc), self._url)}"
        if why is not None:
            raise IndexUnavailable(
                "postgresql",
                f"the write lock of store {store!r} was lost ({why}); nothing was written: try again",
            )

    def _lock(self, store: str) -> tuple[psycopg.Connection[Any], int]:
        """A pooled connection holding the store's advisory lock, and the lock's key."""
        conn = self.pool.getconn()
        try:
            (key,) = conn.execute(_LOCK_KEY, (store,)).fetchone() or (0,)
            row = conn.execute(f"SELECT pg_advisory_lock(%s), {CURRENT_VERSION}", (key,)).fetchone()
            current = int(row[1]) if row is not None and row[1] is not None else SCHEMA_VERSION
            if current > SCHEMA_VERSION:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                raise SchemaTooNew(current)
        except BaseException:
            self.pool.putconn(conn)
            raise
        return conn, int(key)

    @contextmanager
    def _connection(self, store: str) -> Iterator[psycopg.Connection[Any]]:
        """The connection holding the store's lock in this thread, else one from the pool."""
        with self._guard:
            held = self._held.get(store)
        if held is not None and held.owner == threading.get_ident():
            yield held.conn
            return
        with self.pool.connection() as conn:
            yield conn

    # -- writing ----------------------------------------------------------------------------
    @_reachable
    def sync(self, store: str, docs: Sequence[IndexedDoc], removed: Sequence[str]) -> int:
        """Upsert changed ``docs``, drop ``removed``; the store's version after (see IndexBackend)."""
        version = self._sync(store, docs, removed)
        if len(docs) >= ANALYZE_AFTER:  # a bulk fill: plan the next queries on fresh statistics
            with self._connection(store) as conn:
                conn.execute(
                    "ANALYZE coffer_documents, coffer_chunks" + (", coffer_vectors" if self.vectors else "")
                )
        return version

    def _sync(self, store: str, docs: Sequence[IndexedDoc], removed: Sequence[str]) -> int:
        with self._connection(store) as conn, conn.transaction():
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
                "INSERT INTO coffer_chunks (store, path, position, text, words) "
                f"VALUES (%s, %s, %s, %s, to_tsvector('{TS_CONFIG}', %s))",
                [
                    (store, d.path, position, clean, index_text(with_parts(clean)))
                    for d in docs
                    for position, clean in enumerate(map(storable, d.chunks))
                ],
            )

    @_reachable
    def drop_store(self, store: str) -> None:
        """Forget every row of ``store`` (its folder is gone: not because the folder was swapped)."""
        self._own_folder()
        with self._connection(store) as conn, conn.transaction():
            conn.execute("DELETE FROM coffer_documents WHERE store = %s", (store,))
            conn.execute("DELETE FROM coffer_stores WHERE name = %s", (store,))

    # -- reading ----------------------------------------------------------------------------
    @_retried
    def digests(self, store: str, model: str | None = None) -> dict[str, str]:
        """path -> sha256 of every document of ``store``; with ``model``, ``""`` for a document
        holding no vectors of that model."""
        with self.pool.connection() as conn:
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

    @_retried
    def version(self, store: str) -> int:
        """How many syncs changed ``store``."""
        with self.pool.connection() as conn:
            return self._version(conn, store)

    @staticmethod
    def _version(conn: psycopg.Connection[Any], store: str) -> int:
        row = conn.execute("SELECT version FROM coffer_stores WHERE name = %s", (store,)).fetchone()
        return int(row[0]) if row else 0

    @_retried
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
        with self.pool.connection() as conn:
            for store in dict.fromkeys(stores):
                rows = self._words(conn, store, query, limit, only)
                if not rows:
                    rows = self._substrings(conn, store, query, limit, only) or near_rows(
                        conn, self._SELECT, store, query, limit * CHUNKS_PER_DOC, only
                    )
                out[store] = self._best(rows, limit)
        return out

    @_retried
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
        with self.pool.connection() as conn:
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
            hits = self._best(rows, limit)
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
            with self.pool.connection() as conn:
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

    _SELECT = (
        "SELECT d.id, d.path, d.title, d.updated_at, c.text, {score} AS score "
        "FROM coffer_chunks c JOIN coffer_documents d ON d.store = c.store AND d.path = c.path "
    )

    def _words(self, conn: Conn, store: str, query: str, limit: int, only: Only) -> list[tuple[Any, ...]]:
        where, params = only
        terms = tsquery_terms(keyword_terms(query))
        if not terms:
            return []
        tsquery = " || ".join([f"plainto_tsquery('{TS_CONFIG}', %s)"] * len(terms))
        # Rank the chunks alone and join the documents for the best few only: joining every match
        # first took twice as long at 100k facts. A filter needs the documents inside.
        join = " JOIN coffer_documents d ON d.store = c.store AND d.path = c.path" if where else ""
        sql = (
            f"WITH q AS (SELECT {tsquery} AS q), top AS ("
            "SELECT c.store, c.path, c.position, c.text, ts_rank(c.words, q.q, 1) AS score "
            f"FROM coffer_chunks c{join}, q WHERE c.store = %s AND c.words @@ q.q{where} "
            "ORDER BY score DESC, c.path, c.position LIMIT %s) "
            "SELECT d.id, d.path, d.title, d.updated_at, top.text, top.score FROM top "
            "JOIN coffer_documents d ON d.store = top.store AND d.path = top.path "
            "ORDER BY top.score DESC, top.path, top.position"
        )
        return conn.execute(sql, (*terms, store, *params, limit * CHUNKS_PER_DOC)).fetchall()

    def _substrings(
        self, conn: Conn, store: str, query: str, limit: int, only: Only
    ) -> list[tuple[Any, ...]]:
        where, params = only
        plan = plan_query(query)
        terms = [*plan.fts_terms, *plan.short_terms]
        if not terms:
            return []
        # Each term found counts one; shorter passages first among equals (as on SQLite).
        count = " + ".join(["(c.text ILIKE %s)::int"] * len(terms))
        likes = [f"%{escape_like(t)}%" for t in terms]
        any_of = " OR ".join(["c.text ILIKE %s"] * len(terms))
        sql = self._SELECT.format(score=f"({count})") + (
            f"WHERE c.store = %s AND ({any_of}){where} ORDER BY score DESC, length(c.text), d.path LIMIT %s"
        )
        return conn.execute(sql, (*likes, store, *likes, *params, limit * CHUNKS_PER_DOC)).fetchall()

    @staticmethod
    def _best(rows: Sequence[tuple[Any, ...]], limit: int) -> list[BackendHit]:
        """The first (best) chunk of each document, for the first ``limit`` documents."""
        best: dict[str, BackendHit] = {}
        for doc_id, path, title, updated_at, text, score in rows:
            if path not in best:
                when = updated_at.astimezone(UTC)
                best[path] = BackendHit(str(doc_id), str(path), str(title), when, str(text), float(score))
                if len(best) == limit:
                    break
        return list(best.values())

    def close(self) -> None:
        """Close the pool (its connections release any advisory lock they held) and stop asking
        whether a server that was down is back."""
        self.outage.close()
        self.pool.close()

"""The single re-index routine: every write path and every reconcile goes through it.

sha256 of the file unchanged -> no-op; changed -> drop the old chunk/FTS rows, re-chunk,
insert, upsert the documents row.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from .._models import MemoryFact
from .._store.files import FactParseError, ParsedFile, parse_fact, read_bytes
from .._store.paths import StorePaths
from .chunking import MAX_WINDOWS, vector_windows
from .cjk import index_forms, index_text
from .coverage import stored_tokens
from .db import DAMAGE, IndexDB
from .holding import Holding
from .keys import KIND, chunk_id, store_scope, vec_chunk_id
from .keys import strip_header as strip_header  # where recall has always found it
from .pending import CHUNK_VALUES, NewRows, PendingDoc, session_windows, stored_by_text
from .pending import SESSION_CONTEXT_LINES as SESSION_CONTEXT_LINES  # where _ahead reads it
from .readahead import Read
from .removal import delete_document_rows, delete_store_rows
from .rows import described, indexed_chunks, project_id, write_tags
from .segments import after_bulk_load, bulk_hash, merge_step
from .session import CONTEXT_PENDING_KEY, context_lines, successors, write_load_contexts, write_word_contexts
from .vec import VecIndex, embedded, failure_text

if TYPE_CHECKING:  # the plugin surface imports pluggy, which a keyword recall does without
    from ..plugins.hookspecs import Vector

Outcome = Literal["added", "updated", "unchanged"]
DEFAULT_MAX_FILE_BYTES = 4 * 1024 * 1024
# A file changed within this long before its stat was taken may change again within the same
# ctime tick (the kernel's coarse clock) unseen: its row keeps no ctime, so the next full scan
# hashes it once more (git's "racily clean" entries).
RACY_NS = 2_000_000_000


def stat_columns(st: os.stat_result) -> tuple[int, int, int, int]:
    """``file_size, file_mtime_ns, file_ctime_ns, file_ino`` of a documents row."""
    racy = time.time_ns() - st.st_ctime_ns < RACY_NS
    return st.st_size, st.st_mtime_ns, -1 if racy else st.st_ctime_ns, st.st_ino


log = logging.getLogger("coffer_memory.reindex")
# The same line goes into the ``context`` column of the fact's first word-index row, which bm25
# weighs at ``fts.CONTEXT_WEIGHT``: a reply is found by the words of what it answers.
KEYWORD_CONTEXT_LINES = 1


class Reindexer:
    """Writes and removes index rows for memory files of one home."""

    def __init__(
        self,
        db: IndexDB,
        memory_dir: Path,
        vectors: VecIndex | None = None,
        batch_size: int = 64,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.db = db
        self.memory_dir = memory_dir
        self.vectors = vectors
        self.batch_size = batch_size
        # Hand-written files over this are not read (one 50 MB file took 23 s and 839 MiB).
        self.max_file_bytes = max_file_bytes
        self.pending: list[PendingDoc] = []
        self.embedding_failures = 0
        # Inside a bulk load's transaction, files get no savepoint of their own: FTS5 flushes its
        # pending terms on every savepoint, so each file would become a segment (2.5x slower).
        # Nothing is lost: a file that cannot be read or parsed fails before its first write.
        self.bulk = False
        self._vec_dropped: set[str] = set()
        self._new: NewRows | None = None
        self._words_written = 0  # word-index rows a bulk load wrote (``segments.after_bulk_load``)
        # Facts whose predecessor in their session changed or went: their vectors hold the old
        # context. (store, id) -> content sha256; their rows hold the sentinel until re-embedded.
        self._stale: dict[tuple[str, str], str] = {}
        # Session facts a bulk load wrote with empty keyword context: their predecessor may come
        # later in the load, so the context is written at its end (``_write_contexts``).
        self._context_due: set[tuple[str, str]] = set()
        # Vectors this thread's write computed before it took the lock (``ahead``), by text.
        self._ahead = threading.local()
        # This thread's reconcile leaves what it indexes to be embedded after the lock (``holding``).
        self._held = threading.local()

    def _transaction(self) -> AbstractContextManager[object]:
        if self.bulk and not self.db.conn.get_autocommit():
            return nullcontext()
        return self.db.transaction()

    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Index many files in the caller's transactions (no savepoint per file)."""
        before, self.bulk = self.bulk, True
        if not before:
            self._words_written = 0
        # A load that never reached its end left session facts without their keyword context.
        cut_short = not before and self.db.get_kv(CONTEXT_PENDING_KEY) is not None
        try:
            yield
            if cut_short or (not before and self._context_due):
                with self.db.transaction():
                    self._words_written += write_load_contexts(
                        self.db, KEYWORD_CONTEXT_LINES, self._context_due, every=cut_short
                    )
            if not before:
                after_bulk_load(self.db, self._words_written)
                self.bulk = False
                self.flush_embeddings()  # the session facts held back (see flush_embeddings)
        finally:
            self.bulk = before
            if not before:
                self._context_due.clear()
            self._vec_dropped.clear()
            self._new = None  # rows of a load that failed went with its transaction

    def holding(self) -> Holding:
        """While the block runs, this thread's indexing embeds nothing: documents keep the
        sentinel, and the facts after changed ones in their sessions get it (their context
        changed), for ``embed_later`` to embed after the caller lets the lock go."""
        return Holding(self._held)

    def held(self) -> bool:
        """Whether this thread's indexing leaves the embedding for after the lock (``holding``)."""
        return bool(getattr(self._held, "on", False))

    def paths(self, store: str) -> StorePaths:
        """The store's paths."""
        return StorePaths.of(self.memory_dir, store)

    def index_file(
        self,
        store: str,
        path: Path,
        *,
        data: bytes | None = None,
        st: os.stat_result | None = None,
        defer_embedding: bool = False,
        names: tuple[str, str] | None = None,
        absent: bool = False,
    ) -> tuple[Outcome, ParsedFile]:
        """Bring the index in line with one file. Raises FactParseError (rows dropped) or OSError.

        With vectors enabled the new chunks are embedded at once, or queued for
        ``flush_embeddings`` when ``defer_embedding`` is set (batching for bulk work).
        ``names`` is the file's (store-relative path, ``documents.path``) when the caller has
        them already (a scan: working them out with pathlib was a fifth of a rebuild).
        ``absent``: the caller knows the index has no row for the file (a scan under the store
        lock), so it is not looked up.
        """
        rel, key = names if names is not None else (self.paths(store).relative(path), self.db.key(path))
        if data is None or st is None:
            try:
                data, st = read_bytes(path, max_bytes=self.max_file_bytes)
            except FactParseError:  # too large: whatever was indexed for it goes
                self.remove_path(store, path)
                raise
        row = (
            []
            if absent
            else self.db.rows(
                "SELECT id, content_sha256 FROM documents WHERE resource_name = ? AND path = ?", (store, key)
            )
        )
        try:
            parsed = parse_fact(data, store=store, relpath=rel, mtime=st.st_mtime)
        except FactParseError:
            if row:
                with self._transaction():
                    self._delete_rows(store, row[0][0])
            raise
        if row and row[0][1] == parsed.sha256 and row[0][0] == parsed.fact.id:
            self.db.conn.execute(
                "UPDATE documents SET file_size = ?, file_mtime_ns = ?, file_ctime_ns = ?, file_ino = ? "
                "WHERE resource_name = ? AND path = ?",
                (*stat_columns(st), store, key),
            )
            # Rows from before the tags table (schema 7) are re-read once: their tags land here.
            rowid = self.db.scalar(
                "SELECT rowid FROM documents WHERE resource_name = ? AND path = ?", (store, key)
            )
            write_tags(self.db.conn, int(rowid), parsed.fact.tags, replace=True)
            return "unchanged", parsed
        fact = parsed.fact
        if row and self.vectors is not None and not defer_embedding and not self.held():
            # Its unchanged texts keep their vectors (``_vectors_of``): an append re-embedded them all.
            self._ahead.kept = stored_by_text(self.db, self.vectors, store, row[0][0])
        with self._transaction():
            if row:
                self._delete_rows(store, row[0][0])
            elif self.vectors is None and store not in self._vec_dropped:
                # Vectors are off: the store's vec table (if any) misses this document from now on.
                self.db.conn.execute("DELETE FROM vec_stores WHERE resource_name = ?", (store,))
                if self.bulk:  # once per store and load, not once per file
                    self._vec_dropped.add(store)
            self.db.conn.execute(
                "INSERT INTO documents (rowid, id, kind, resource_name, project_id, path, title, description, "
                "metadata, content_sha256, created_at, updated_at, file_size, file_mtime_ns, "
                "file_ctime_ns, file_ino) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self._document_row(None, store, key, rel, parsed, st),
            )
            write_tags(self.db.conn, self.db.conn.last_insert_rowid(), fact.tags)
            chunks = indexed_chunks(fact.title, fact.description, fact.body)
            context = self._keyword_context(store, fact)
            for position, text in enumerate(chunks):
                cid = chunk_id(store, fact.id, position)
                self.db.conn.execute(
                    "INSERT INTO chunks (id, document_id, kind, resource_name, position, tokens) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (cid, fact.id, KIND, store, position, stored_tokens(text)),
                )
                # The FTS row shares the chunk's rowid, so deletes find it without a scan.
                rowid = self.db.conn.last_insert_rowid()
                words, searched, written = index_forms(text)
                self.db.conn.execute(
                    "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id, written) VALUES (?, ?, ?, ?, ?)",
                    (rowid, searched, store, cid, written),
                )
                self.db.conn.execute(
                    "INSERT INTO documents_words (rowid, text, store, context) VALUES (?, ?, ?, ?)",
                    (rowid, words, store_scope(store), "" if position else context),
                )
            if fact.origin_session_id and KEYWORD_CONTEXT_LINES > 0 and not self.bulk:
                # The fact after it in its session now follows this one: its context changes.
                write_word_contexts(
                    self.db,
                    store,
                    KEYWORD_CONTEXT_LINES,
                    [n for n, _ in successors(self.db, store, [fact.id]).values()],
                )
            if self.bulk:
                self._words_written += len(chunks)
            else:  # a single write: its new segment is folded in before it piles up with others
                merge_step(self.db)
        if self.vectors is not None:
            self.pending.append(
                PendingDoc(store, fact.id, parsed.sha256, tuple(chunks), bool(fact.origin_session_id))
            )
            if not defer_embedding:
                try:
                    self.flush_embeddings()
                finally:
                    self._ahead.kept = None
        return ("updated" if row else "added"), parsed

    def add_new(
        self, store: str, path: str | Path, names: tuple[str, str], read: Read | None = None
    ) -> ParsedFile:
        """Queue the rows of a file the index has no row for, inside a bulk load's transaction;
        ``write_new`` writes them. Raises FactParseError or OSError before queueing anything.
        ``read``: what reading the file gave already (``readahead``), its bytes and stat or the error.

        The rows are those ``index_file`` writes; building them without a statement per row cut
        a cold rebuild's statements from four per file to four per batch.
        """
        rel, key = names
        if isinstance(read, Exception):
            raise read
        data, st = read_bytes(path, max_bytes=self.max_file_bytes) if read is None else read
        parsed = parse_fact(data, store=store, relpath=rel, mtime=st.st_mtime)
        fact = parsed.fact
        if self.vectors is None and store not in self._vec_dropped:  # once per store and load
            self._drop_vectors_of(store)
        new = self._new
        if new is None:
            new = self._new = NewRows(
                next_document=int(self.db.scalar("SELECT coalesce(max(rowid), 0) FROM documents")) + 1,
                next_chunk=int(self.db.scalar("SELECT coalesce(max(rowid), 0) FROM chunks")) + 1,
            )
        document = new.next_document
        new.next_document += 1
        new.documents.append(self._document_row(document, store, key, rel, parsed, st))
        fact_id = fact.id
        if fact.tags:
            new.tags.extend((document, tag) for tag in fact.tags)
        scope = store_scope(store)
        chunks = indexed_chunks(fact.title, fact.description, fact.body)
        rowid = new.next_chunk
        new.next_chunk += len(chunks)
        for position, text in enumerate(chunks):
            cid = f"{scope}:{fact_id}:{position}"  # keys.chunk_id
            tokens = stored_tokens(text)
            words, searched, written = index_forms(text)
            # Every value of the chunk at once, after anything that may raise (``CHUNK_VALUES``).
            new.chunk_values.extend(
                (rowid, cid, fact_id, store, position, tokens, searched, written, words, scope)
            )
            rowid += 1
        if fact.origin_session_id and KEYWORD_CONTEXT_LINES > 0:
            self._context_due.add((store, fact.id))
        if self.vectors is not None:
            self.pending.append(
                PendingDoc(store, fact.id, parsed.sha256, tuple(chunks), bool(fact.origin_session_id))
            )
        return parsed

    def _document_row(
        self, rowid: int | None, store: str, key: str, rel: str, parsed: ParsedFile, st: os.stat_result
    ) -> tuple[object, ...]:
        """A ``documents`` row from ``rowid`` (None: SQLite picks it) to ``file_ino``; its calls
        written out (a rebuild makes one per file)."""
        title, description, meta, created, updated = described(parsed.fact, rel, parsed.times)
        racy = time.time_ns() - st.st_ctime_ns < RACY_NS  # as stat_columns says
        return (
            rowid,
            parsed.fact.id,
            KIND,
            store,
            project_id(store),
            key,
            title,
            description,
            meta,
            "" if self.vectors is not None else parsed.sha256,
            created,
            updated,
            st.st_size,
            st.st_mtime_ns,
            -1 if racy else st.st_ctime_ns,
            st.st_ino,
        )

    def write_new(self) -> None:
        """Write the rows ``add_new`` queued (before any other write to these tables)."""
        if self._context_due:  # committed with the batch: a load cut short is finished by the next
            self.db.set_kv(CONTEXT_PENDING_KEY, "1")
        new, self._new = self._new, None
        if new is None:
            return
        bulk_hash(self.db)
        conn = self.db.conn
        conn.executemany(
            "INSERT INTO documents (rowid, id, kind, resource_name, project_id, path, title, description, "
            "metadata, content_sha256, created_at, updated_at, file_size, file_mtime_ns, "
            "file_ctime_ns, file_ino) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            new.documents,
        )
        conn.executemany("INSERT OR IGNORE INTO document_tags (document_rowid, tag) VALUES (?, ?)", new.tags)
        # The chunks' rows made as they are written, from their columns.
        values = new.chunk_values
        rowids, ids, docs, stores, positions, tokens, searched, written, words, scopes = (
            values[i::CHUNK_VALUES] for i in range(CHUNK_VALUES)
        )
        conn.executemany(
            "INSERT INTO chunks (rowid, id, document_id, kind, resource_name, position, tokens) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            zip(rowids, ids, docs, repeat(KIND), stores, positions, tokens),
        )
        conn.executemany(
            "INSERT INTO documents_fts (rowid, text, resource_name, chunk_id, written) VALUES (?, ?, ?, ?, ?)",
            zip(rowids, searched, stores, ids, written, strict=True),
        )
        conn.executemany(
            "INSERT INTO documents_words (rowid, text, store, context) VALUES (?, ?, ?, ?)",
            zip(rowids, words, scopes, repeat("")),
        )
        self._words_written += len(rowids)

    def _drop_vectors_of(self, store: str) -> None:
        if self.vectors is None and store not in self._vec_dropped:  # add_new asks first too
            # Vectors are off: the store's vec table (if any) misses these documents from now on.
            self.db.conn.execute("DELETE FROM vec_stores WHERE resource_name = ?", (store,))
            self._vec_dropped.add(store)

    def flush_embeddings(self, progress: Callable[[int], None] | None = None) -> int:
        """Embed the queued documents' chunks in batches; returns how many documents got vectors
        (``progress`` is told that count after each batch).

        Until its vectors are in, a document's row holds the empty-string sha256 sentinel, so
        a crash or an embedder failure leaves the keyword rows searchable and a later
        reconcile retries the embedding (after the shared back-off, ``vec.PAUSE_SECONDS``).
        """
        if self.vectors is None or not (self.pending or self._stale):
            return 0
        if self.vectors.paused():
            self.pending = []  # rows keep the sentinel; retried once the back-off is over
            self._stale.clear()
            return 0
        docs, self.pending = self.pending, []
        if self.held():  # rows keep the sentinel, the facts after them in their sessions get it
            self._successors_of(docs)
            return 0
        if self.bulk and SESSION_CONTEXT_LINES > 0:
            # A session fact is embedded with a line of the fact before it, which a later batch
            # of the load may bring: they wait for the load's end, so each is embedded once.
            self.pending = [d for d in docs if d.session]
            docs = [d for d in docs if not d.session]
        docs += self._successors_of(docs)
        done = 0
        batch: list[PendingDoc] = []
        for index, doc in enumerate(docs):
            batch.append(doc)
            size = sum(len(d.chunks) for d in batch)
            if size < self.batch_size and index + 1 < len(docs):
                continue
            if self.embed_docs(batch) < len(batch):  # failed: the embedder is paused
                return done
            done += len(batch)
            batch = []
            if progress is not None:
                progress(done)
        return done

    @staticmethod
    def texts_of(chunks: Sequence[str], context: str = "") -> list[str]:
        """The texts a document of these chunks is embedded as: one per window of each chunk
        (``vector_windows``), the first led by its session ``context`` when it has one."""
        windows = [vector_windows(text) for text in chunks]
        if context and windows and windows[0]:
            windows[0][0] = f"{context}\n{windows[0][0]}"
        return [w for per_chunk in windows for w in per_chunk]

    @contextmanager
    def ahead(self, found: Mapping[str, Vector] | Exception) -> Iterator[None]:
        """While the block runs, this thread's embeddings take their vectors from ``found`` (text
        -> vector, computed before the write took the lock: keyword reads wait for the lock, and
        the embedder may take seconds) and ask the embedder only for texts it lacks, so a fact
        that changed between the two is embedded as it is written. ``found`` an exception: the
        embedding failed before the lock, and fails again here (not asked twice)."""
        self._ahead.found = found
        try:
            yield
        finally:
            self._ahead.found = None

    def _vectors_of(self, texts: list[str]) -> list[Vector]:
        """The vectors of ``texts``: those computed ahead (``ahead``), the others from the embedder."""
        assert self.vectors is not None
        found: Mapping[str, Vector] | Exception | None = getattr(self._ahead, "found", None)
        if isinstance(found, Exception):
            raise found
        kept: Mapping[str, Vector] | None = getattr(self._ahead, "kept", None)
        known = {**kept, **(found or {})} if kept else found or {}
        missing = [t for t in texts if t not in known]
        asked = embedded(self.vectors.embedder, missing) if missing else []
        rest = iter(asked)
        return [known[t] if t in known else next(rest) for t in texts]

    def _embed(self, batch: list[PendingDoc]) -> None:
        assert self.vectors is not None
        windows = session_windows(self.db, batch)
        texts = [w for per_doc in windows for per_chunk in per_doc for w in per_chunk]
        vectors = self._vectors_of(texts)
        rows = iter(vectors)
        with self.db.transaction():
            for doc, per_doc in zip(batch, windows, strict=True):
                pairs = [
                    (vec_chunk_id(doc.document_id, pos, w), next(rows))
                    for pos, per_chunk in enumerate(per_doc)
                    for w in range(len(per_chunk))
                ]
                self.vectors.insert(doc.store, pairs)
                # With kind, the primary key finds the row; without it SQLite took the path
                # index and scanned the whole store per document (a 10k rebuild: 90 s of 130).
                self.db.conn.execute(
                    "UPDATE documents SET content_sha256 = ? WHERE kind = ? AND resource_name = ? AND id = ?",
                    (doc.sha256, KIND, doc.store, doc.document_id),
                )

    def embed_docs(self, batch: list[PendingDoc]) -> int:
        """Embed ``batch`` now (``embed_later``, under the lock); how many got vectors (none when
        the embedder failed: it is paused, as ``flush_embeddings`` does)."""
        if self.vectors is None or not batch:
            return 0
        try:
            self._embed(batch)
        except Exception as exc:
            self.embedding_failures += 1
            self.vectors.pause()
            log.warning(
                "embedding failed; keyword rows kept, retried on the next reconcile: %s",
                failure_text(self.vectors.embedder, exc),
            )
            return 0
        return len(batch)

    def _mark_stale(self, store: str, found: dict[str, tuple[str, str]], skip: set[str]) -> None:
        """Give successors found by ``session.successors`` the sentinel and note them in ``_stale``
        (those in ``skip`` or pending already are left alone)."""
        for fact_id, sha in found.values():
            if fact_id in skip or not sha or (store, fact_id) in self._stale:
                continue
            self.db.conn.execute(
                "UPDATE documents SET content_sha256 = '' WHERE kind = ? AND resource_name = ? AND id = ?",
                (KIND, store, fact_id),
            )
            self._stale[(store, fact_id)] = sha

    def _successors_of(self, docs: list[PendingDoc]) -> list[PendingDoc]:
        """The facts to embed again beside ``docs``: those after them in their sessions (their
        context is a line of the fact before) and those ``_delete_rows`` noted, from their rows."""
        in_sessions = [d for d in docs if d.session] if SESSION_CONTEXT_LINES > 0 else []
        if in_sessions:
            with self.db.transaction():
                for store in dict.fromkeys(d.store for d in in_sessions):
                    ids = [d.document_id for d in in_sessions if d.store == store]
                    self._mark_stale(store, successors(self.db, store, ids), set(ids))
        stale, self._stale = self._stale, {}
        queued = {(d.store, d.document_id) for d in docs}
        out = []
        for (store, fact_id), sha in stale.items():
            rows = self.db.rows(
                "SELECT coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid "
                "WHERE c.document_id = ? AND c.resource_name = ? ORDER BY c.position",
                (fact_id, store),
            )
            if rows and (store, fact_id) not in queued:
                out.append(PendingDoc(store, fact_id, sha, tuple(str(r[0]) for r in rows), True))
        return out

    def _keyword_context(self, store: str, fact: MemoryFact) -> str:
        """The ``context`` of a fact's first word-index row as ``index_file`` writes it: its
        predecessor's last line, or empty (no session; or a bulk load, which writes it at its end)."""
        if not fact.origin_session_id or KEYWORD_CONTEXT_LINES <= 0:
            return ""
        if self.bulk:
            self._context_due.add((store, fact.id))
            return ""
        return index_text(context_lines(self.db, store, [fact.id], KEYWORD_CONTEXT_LINES).get(fact.id, ""))

    def _delete_rows(self, store: str, document_id: str) -> None:
        after = successors(self.db, store, [document_id])
        if self.vectors is not None and SESSION_CONTEXT_LINES > 0:
            self._mark_stale(store, after, set())
        if self.vectors is None:
            # Vectors are off: whatever vec table the store had is stale from now on.
            self.db.conn.execute("DELETE FROM vec_stores WHERE resource_name = ?", (store,))
        else:
            positions = self.db.rows(
                "SELECT position FROM chunks WHERE document_id = ? AND resource_name = ?",
                (document_id, store),
            )
            self.vectors.delete(
                store,
                [vec_chunk_id(document_id, int(p[0]), w) for p in positions for w in range(MAX_WINDOWS)],
            )
        delete_document_rows(self.db.conn, store, document_id)
        if KEYWORD_CONTEXT_LINES > 0:  # the fact after it now follows the one before it
            write_word_contexts(self.db, store, KEYWORD_CONTEXT_LINES, [n for n, _ in after.values()])

    def pending_paths(self, store: str) -> list[Path]:
        """Files whose documents still wait for their vectors (the empty-sha256 sentinel)."""
        if self.vectors is None or self.vectors.paused() or self.held():
            return []  # held: embedded after the lock (``embed_later``), not re-indexed under it
        rows = self.db.rows(
            "SELECT path FROM documents WHERE resource_name = ? AND content_sha256 = ''", (store,)
        )
        return [self.db.file(r[0]) for r in rows]

    def remove_path(self, store: str, path: Path) -> str | None:
        """Drop the rows of the document at ``path``; returns its id if there was one."""
        document_id = self.db.scalar(
            "SELECT id FROM documents WHERE resource_name = ? AND path = ?", (store, self.db.key(path))
        )
        if document_id is None:
            return None
        with self.db.transaction():
            self._delete_rows(store, document_id)
        if self._stale and self.db.conn.get_autocommit():
            self.flush_embeddings()  # the fact after it in its session: its context changed
        return str(document_id)

    def repair_index(self) -> None:
        """Reopen the index, moving it aside first if SQLite found it damaged."""
        self.db.repair()
        if self.vectors is not None:
            self.vectors.forget_tables()

    def remove_store(self, store: str) -> None:
        """Drop every index row of a store (a damaged index is replaced by an empty one instead)."""
        try:
            self._remove_store(store)
        except DAMAGE as exc:
            self.db.note_damage(exc)
            self.repair_index()

    def _remove_store(self, store: str) -> None:
        with self.db.transaction():
            delete_store_rows(self.db.conn, store)
            if self.vectors is not None:
                self.vectors.drop_store(store)

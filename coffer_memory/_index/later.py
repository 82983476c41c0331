"""Documents left to be embedded after the lock (``Reindexer.holding``): which they are, as their
files read now, and who is embedding them.

A reconcile in a service indexes keyword rows under the lock and leaves each new or changed
document with the empty-sha256 sentinel; its caller embeds them once it let the lock go
(``_ahead.embed_later``), a batch at a time: read here without the lock, embedded, then read
again under the lock and written only when unchanged (``read_doc`` gives an equal document).

One thread of one process embeds a store's waiting documents at a time (``claim``): another
reader that finds them waiting answers from the rows as they stand instead of embedding them too.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING

from .._store.files import FactParseError, parse_fact, read_bytes
from .pending import PendingDoc
from .rows import described, indexed_chunks

if TYPE_CHECKING:
    from .db import IndexDB
    from .reindex import Reindexer

# Documents per batch: each is embedded without the lock, then written under it.
BATCH_DOCS = 128
# A claim not renewed for this long is taken over (its holder hung or its host is unreachable).
CLAIM_SECONDS = 300.0
_CLAIM_KEY = "embedding_after:"


def waiting(db: IndexDB, store: str, after: int, limit: int = BATCH_DOCS) -> list[tuple[int, str]]:
    """``(rowid, documents.path)`` of up to ``limit`` documents of ``store`` holding the sentinel,
    past rowid ``after``."""
    rows = db.rows(
        "SELECT rowid, path FROM documents WHERE resource_name = ? AND content_sha256 = '' AND rowid > ? "
        "ORDER BY rowid LIMIT ?",
        (store, after, limit),
    )
    return [(int(r[0]), str(r[1])) for r in rows]


def count_waiting(db: IndexDB, store: str) -> int:
    """How many documents of ``store`` hold the sentinel."""
    return int(
        db.scalar("SELECT count(*) FROM documents WHERE resource_name = ? AND content_sha256 = ''", (store,))
    )


def read_doc(db: IndexDB, reindexer: Reindexer, store: str, key: str) -> PendingDoc | None:
    """The document at ``key`` as its file reads now, when ``db`` holds it with the sentinel and
    with rows of exactly that content (else None: the next reconcile re-indexes a changed file).

    Not only its chunks: the row's title, description, metadata and times too. Its vectors in,
    the row holds the file's sha256, and a reconcile that finds that sha256 again keeps the row
    as it is ("unchanged"): an edit of the frontmatter alone (``updated_at``, the session) made
    after the rows were written and before this read would never reach the index."""
    row = db.rows(
        "SELECT id, title, description, metadata, created_at, updated_at FROM documents "
        "WHERE resource_name = ? AND path = ? AND content_sha256 = ''",
        (store, key),
    )
    if not row:
        return None
    path = db.file(key)
    rel = reindexer.paths(store).relative(path)
    try:
        data, st = read_bytes(path, max_bytes=reindexer.max_file_bytes)
        parsed = parse_fact(data, store=store, relpath=rel, mtime=st.st_mtime)
    except (OSError, FactParseError):
        return None
    fact = parsed.fact
    if (fact.id, *described(fact, rel)) != tuple(row[0]):
        return None
    chunks = tuple(indexed_chunks(fact.title, fact.description, fact.body))
    held = db.rows(
        "SELECT coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid "
        "WHERE c.document_id = ? AND c.resource_name = ? ORDER BY c.position",
        (fact.id, store),
    )
    if tuple(str(r[0]) for r in held) != chunks:
        return None
    return PendingDoc(store, fact.id, parsed.sha256, chunks, bool(fact.origin_session_id))


def _me() -> str:
    return f"{socket.gethostname()} {os.getpid()} {threading.get_ident()}"


def _alive(who: str) -> bool:
    """Whether the claimer ``who`` (host, pid, thread) may still be at work."""
    host, pid, thread = who.rsplit(" ", 2)
    if host != socket.gethostname():
        return True  # another machine's: only its age says
    if int(pid) == os.getpid():
        return int(thread) in {t.ident for t in threading.enumerate()}
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claimed_by(db: IndexDB, store: str) -> str | None:
    """The other thread or process (``host pid thread``) holding a live claim on embedding
    ``store``'s waiting documents, or None."""
    held = db.get_kv(_CLAIM_KEY + store)
    if not held:
        return None
    who, _, at = held.rpartition(" ")
    try:
        live = who != _me() and time.time() - float(at) < CLAIM_SECONDS and _alive(who)
    except ValueError:  # not a claim this code wrote: taken over
        live = False
    return who if live else None


def claim(db: IndexDB, store: str) -> bool:
    """Claim (or renew the claim of) embedding ``store``'s waiting documents; False when another
    thread or process holds a live claim. Writer connection, under the index lock and the
    store's file lock (the index lock is one process's: two processes both claimed)."""
    if claimed_by(db, store) is not None:
        return False
    db.set_kv(_CLAIM_KEY + store, f"{_me()} {time.time()}")
    return True


def release(db: IndexDB, store: str) -> None:
    """Give up this thread's claim on ``store`` (writer connection, under the lock)."""
    key = _CLAIM_KEY + store
    held = db.get_kv(key)
    if held is not None and held.rpartition(" ")[0] == _me():
        db.conn.execute("DELETE FROM kv WHERE key = ?", (key,))

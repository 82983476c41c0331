"""Facts of one agent session: their order and their neighbours.

Facts remembered with the same ``origin_session_id`` in a store form a sequence, in id order
(a fact's id is a ULID whose time part is its creation time, to the millisecond; two facts of one
millisecond are ordered by the rest of their ids). ``documents.origin_session`` (schema 8) is
computed from the metadata JSON that the file's frontmatter gives, so a rebuild from the files
gives the same sequences. Recall lets a hit lend part of its score to its neighbours in that
sequence (a reply whose meaning lives in the turn before it), and vector indexing embeds a fact
with its predecessor's last line in front (``predecessor_context``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .cjk import index_text
from .db import IndexDB
from .keys import KIND, store_scope, strip_header
from .migrations import CONTEXT_PENDING_KEY as CONTEXT_PENDING_KEY  # where reindex reads it
from .snapshot import in_list

# The most candidates whose neighbours one query looks up (SQLite's bound parameters are plenty).
MAX_LOOKUP = 200
# The most characters of context a fact borrows from the one before it (one long line).
CONTEXT_CHARS = 400


def neighbours(db: IndexDB, store: str, ids: Sequence[str], depth: int) -> dict[str, list[tuple[str, int]]]:
    """For each of ``ids`` that has a session, up to ``depth`` facts before and after it in that
    session, as ``(id, offset)``: ``-1`` the one just before, ``1`` the one just after.

    One query over ``idx_documents_session``; ids without a session are left out.
    """
    if depth <= 0 or not ids:
        return {}
    marks, wanted = in_list(list(dict.fromkeys(ids))[:MAX_LOOKUP])
    rows = db.rows(
        f"SELECT c.id, {neighbour_columns(depth)} FROM documents c WHERE c.kind = ? AND c.resource_name = ? "
        f"AND c.origin_session IS NOT NULL AND c.id IN ({marks})",
        (KIND, store, *wanted),
    )
    out: dict[str, list[tuple[str, int]]] = {}
    for fact_id, earlier, later in rows:
        found = neighbour_ids(earlier, later)
        if found:
            out[str(fact_id)] = found
    return out


def neighbour_columns(depth: int) -> str:
    """Two SQL columns of a ``documents`` row ``c``: the ids of up to ``depth`` facts before it and
    after it in its session, comma-joined (NULL without a session: the lookups are skipped)."""
    side = (
        "(SELECT group_concat(id) FROM (SELECT n.id FROM documents n WHERE n.kind = c.kind "
        "AND n.resource_name = c.resource_name AND n.origin_session = c.origin_session "
        "AND n.id {op} c.id ORDER BY n.id {order} LIMIT {depth}))"
    )
    before = side.format(op="<", order="DESC", depth=int(depth))
    after = side.format(op=">", order="ASC", depth=int(depth))
    return (
        f"CASE WHEN c.origin_session IS NULL THEN NULL ELSE {before} END, "
        f"CASE WHEN c.origin_session IS NULL THEN NULL ELSE {after} END"
    )


def neighbour_ids(earlier: object, later: object) -> list[tuple[str, int]]:
    """``neighbour_columns``' two values as ``(id, offset)``, nearest first on each side."""
    found = [(i, -k) for k, i in enumerate(sorted(str(earlier or "").split(","), reverse=True), 1) if i]
    found += [(i, k) for k, i in enumerate(sorted(str(later or "").split(",")), 1) if i]
    return found


def _adjacent(op: str, order: str) -> str:
    """SQL for the rowid of the fact just before (``<``, ``DESC``) or after (``>``, ``ASC``) the
    row ``c`` in its session."""
    return (
        "(SELECT m.rowid FROM documents m WHERE m.kind = c.kind AND m.resource_name = c.resource_name "
        f"AND m.origin_session = c.origin_session AND m.id {op} c.id ORDER BY m.id {order} LIMIT 1)"
    )


def _per_fact(
    db: IndexDB, store: str, ids: Sequence[str], columns: str, joined: str
) -> list[tuple[object, ...]]:
    """``SELECT c.id, <columns> FROM documents c <joined>`` for each of ``ids`` that has a session,
    ``MAX_LOOKUP`` ids a query."""
    wanted = list(dict.fromkeys(ids))
    rows: list[tuple[object, ...]] = []
    for start in range(0, len(wanted), MAX_LOOKUP):
        part = wanted[start : start + MAX_LOOKUP]
        rows += db.rows(
            f"SELECT c.id, {columns} FROM documents c {joined} WHERE c.kind = ? AND c.resource_name = ? "
            f"AND c.origin_session IS NOT NULL AND c.id IN ({','.join('?' * len(part))})",
            (KIND, store, *part),
        )
    return rows


def predecessors(db: IndexDB, store: str, ids: Sequence[str]) -> dict[str, str]:
    """The text of the last chunk of the fact just before each of ``ids`` in its session (as
    indexed, header and all); ids without a session or without a predecessor are left out."""
    last_chunk = (
        "(SELECT coalesce(f.written, f.text) FROM chunks k JOIN documents_fts f ON f.rowid = k.rowid WHERE k.resource_name = p.resource_name "
        "AND k.document_id = p.id ORDER BY k.position DESC LIMIT 1)"
    )
    rows = _per_fact(db, store, ids, last_chunk, f"JOIN documents p ON p.rowid = {_adjacent('<', 'DESC')}")
    return {str(i): str(text) for i, text in rows if text is not None}


def successors(db: IndexDB, store: str, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The fact just after each of ``ids`` in its session: id -> (its id, its content_sha256)."""
    rows = _per_fact(
        db, store, ids, "n.id, n.content_sha256", f"JOIN documents n ON n.rowid = {_adjacent('>', 'ASC')}"
    )
    return {str(i): (str(n), str(sha)) for i, n, sha in rows}


def context_lines(db: IndexDB, store: str, ids: Sequence[str], lines: int) -> dict[str, str]:
    """The last ``lines`` lines (at most ``CONTEXT_CHARS``) of the fact before each of ``ids`` in
    its session, header left out; ids without such a fact are left out."""
    out = {}
    for fact_id, text in predecessors(db, store, ids).items():
        context = _context(text, lines)
        if context:
            out[fact_id] = context
    return out


def _context(text: str, lines: int) -> str:
    """The last ``lines`` lines (at most ``CONTEXT_CHARS``) of a fact's last chunk, header left out."""
    found = strip_header(text).strip().splitlines()
    return "\n".join(found[-lines:])[-CONTEXT_CHARS:] if found else ""


def appended_context(db: IndexDB, store: str, session: str, lines: int) -> str:
    """The context a fact remembered now in ``session`` would be embedded with: the last lines of
    the session's latest fact in ``store`` (ids grow with time), ``""`` when it has none."""
    rows = db.rows(
        "SELECT (SELECT coalesce(f.written, f.text) FROM chunks k JOIN documents_fts f ON f.rowid = k.rowid "
        "WHERE k.resource_name = d.resource_name AND k.document_id = d.id ORDER BY k.position DESC LIMIT 1) "
        "FROM documents d WHERE d.kind = ? AND d.resource_name = ? AND d.origin_session = ? "
        "ORDER BY d.id DESC LIMIT 1",
        (KIND, store, session),
    )
    return _context(str(rows[0][0]), lines) if rows and rows[0][0] is not None else ""


def write_word_contexts(
    db: IndexDB, store: str, lines: int, ids: Sequence[str], *, only_found: bool = False
) -> int:
    """Write the first word-index row of each of ``ids`` again, its ``context`` column the fact
    before it as it is now (``context_lines``): its predecessor changed, went, or came later in
    a load. ``only_found``: rows that get no context are left alone (a load wrote them without).
    Returns how many rows were written (inside the caller's transaction)."""
    written = 0
    wanted = list(dict.fromkeys(ids))
    for start in range(0, len(wanted), MAX_LOOKUP):
        part = wanted[start : start + MAX_LOOKUP]
        context = context_lines(db, store, part, lines)
        if only_found:
            part = [i for i in part if i in context]
        if not part:
            continue
        rows = db.rows(
            "SELECT c.rowid, c.document_id, coalesce(f.written, f.text) FROM chunks c JOIN documents_fts f ON f.rowid = c.rowid "
            f"WHERE c.resource_name = ? AND c.position = 0 AND c.document_id IN ({','.join('?' * len(part))})",
            (store, *part),
        )
        for rowid, fact_id, text in rows:
            # Contentless: a row is replaced whole (FTS5 needs every column of an update).
            db.conn.execute("DELETE FROM documents_words WHERE rowid = ?", (rowid,))
            db.conn.execute(
                "INSERT INTO documents_words (rowid, text, store, context) VALUES (?, ?, ?, ?)",
                (rowid, index_text(str(text)), store_scope(store), index_text(context.get(str(fact_id), ""))),
            )
        written += len(rows)
    return written


def write_load_contexts(db: IndexDB, lines: int, due: set[tuple[str, str]], *, every: bool = False) -> int:
    """At a bulk load's end, the context of the session facts ``due`` (store, id) it wrote
    without, and of the facts after them (whose predecessor may have changed), as a file-by-file
    write would leave them (``write_word_contexts``); ``every``: of every session fact (an earlier
    load was cut short before its end). Clears ``CONTEXT_PENDING_KEY``; returns the rows written."""
    written = 0
    if every:
        for (store,) in db.rows(
            "SELECT DISTINCT resource_name FROM documents WHERE origin_session IS NOT NULL"
        ):
            ids = [
                str(r[0])
                for r in db.rows(
                    "SELECT id FROM documents WHERE resource_name = ? AND origin_session IS NOT NULL",
                    (store,),
                )
            ]
            written += write_word_contexts(db, str(store), lines, ids)
    for store in sorted({s for s, _ in due} if not every else ()):
        ids = sorted(i for s, i in due if s == store)
        after = [n for n, _ in successors(db, store, ids).values() if (store, n) not in due]
        written += write_word_contexts(db, store, lines, ids, only_found=True)
        written += write_word_contexts(db, store, lines, after)
    db.conn.execute("DELETE FROM kv WHERE key = ?", (CONTEXT_PENDING_KEY,))
    return written

"""The values in the index's rows: each column a read decodes holds what coffer writes there.

Another program's ``UPDATE`` on ``index.db`` (a blob or a number where coffer writes text, a NULL
in FTS5's untyped columns, bytes that are not UTF-8 stored as text, a time with no zone or out of
range) passed every check of the file,
and each keyword or grep recall that met the row died with a raw ``TypeError`` (``ValueError``,
``AttributeError``): the file is unchanged, so ``reindex`` left the row as it was.

Nothing is checked on the hot path: a read that fails with one of ``DECODE_ERRORS`` asks
``note_values``, which scans the rows (tens of milliseconds at 10k facts, most of it parsing
the times in Python; SQL's ``strftime`` took longer) and, when it finds such a
value, notes the file as damaged, as SQLite's own corruption errors are: the next read moves it
aside and rebuilds it from the files. An error with no such value behind it is the read's own
and goes on as it was. ``coffer doctor`` asks it too.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import apsw

from .._errors import IndexUnavailable


class _Noting(Protocol):
    """What ``note_values`` reads of an ``IndexDB``: a protocol, not the class, since db.py
    imports ``clash`` from here (no import cycle between the index's modules)."""

    @property
    def path(self) -> object: ...
    @property
    def busy(self) -> AbstractContextManager[Any]: ...
    @property
    def generation(self) -> int: ...
    @property
    def shared(self) -> Any: ...
    def current(self) -> apsw.Connection: ...


log = logging.getLogger("coffer_memory._index")

# What decoding a row's value that is not what coffer wrote raises (a blob where a ``str`` is
# split, joined or parsed; a NULL measured; a time ``fromisoformat`` refuses or cannot place; a
# chunk id with too few parts cut into them).
DECODE_ERRORS = (TypeError, ValueError, AttributeError, OverflowError, IndexError)

TEXT = "text"
NUMBER = "integer"
TEXT_OR_NULL = "text or NULL"
# Each table's columns a read decodes, with the storage class coffer writes into them. Times are
# text here and parsed besides (``_times``).
COLUMNS: dict[str, dict[str, str]] = {
    "documents": {
        **dict.fromkeys(
            ("id", "kind", "resource_name", "project_id", "path", "title", "metadata", "content_sha256"), TEXT
        ),
        **dict.fromkeys(("source_mode", "created_at", "updated_at"), TEXT),
        "description": TEXT_OR_NULL,
        **dict.fromkeys(("locked", "file_size", "file_mtime_ns", "file_ctime_ns", "file_ino"), NUMBER),
    },
    "chunks": {
        **dict.fromkeys(("id", "document_id", "kind", "resource_name"), TEXT),
        "position": NUMBER,
        "tokens": TEXT_OR_NULL,
    },
    "documents_fts": {**dict.fromkeys(("text", "resource_name", "chunk_id"), TEXT), "written": TEXT_OR_NULL},
    "store_state": {"resource_name": TEXT, "dirs": TEXT, "file_count": NUMBER},
    "vec_stores": {**dict.fromkeys(("resource_name", "table_name", "model_id"), TEXT), "dimensions": NUMBER},
    "broken_files": {
        **dict.fromkeys(("resource_name", "path", "error"), TEXT),
        **dict.fromkeys(("file_size", "file_mtime_ns"), NUMBER),
    },
    "kv": dict.fromkeys(("key", "value"), TEXT),
    "document_tags": {"document_rowid": NUMBER, "tag": TEXT},
    "memory_store_labels": dict.fromkeys(("store_name", "label"), TEXT),
    "memory_store_project_roots": dict.fromkeys(("store_name", "project_root"), TEXT),
}
TIMES = ("created_at", "updated_at")


def _test(column: str, kind: str) -> str:
    if kind == TEXT_OR_NULL:
        return f"typeof({column}) NOT IN ('text', 'null')"
    return f"typeof({column}) != '{kind}'"


def _query(table: str, columns: dict[str, str]) -> str:
    """The first of ``table``'s columns holding another storage class in some row, and that class."""
    bad = " ".join(f"WHEN {_test(c, k)} THEN '{c}'" for c, k in columns.items())
    held = " ".join(f"WHEN {_test(c, k)} THEN typeof({c})" for c, k in columns.items())
    return (
        f"SELECT bad, held FROM (SELECT CASE {bad} END AS bad, CASE {held} END AS held FROM {table}) "
        "WHERE bad IS NOT NULL LIMIT 1"
    )


QUERIES = {table: _query(table, columns) for table, columns in COLUMNS.items()}

# The text columns whose value is a chunk id (``keys.chunk_id``: ``<store-scope>:<doc-id>:<position>``),
# which reads cut at its colons: text of another shape passed the storage-class check and failed a
# keyword recall with an ``IndexError`` (or found no document). Its digits stripped from the end,
# an id ends in a colon with two parts before it, neither empty.
CHUNK_IDS = {"documents_fts": "chunk_id", "chunks": "id"}


def _shape_query(table: str, column: str) -> str:
    stripped = f"rtrim({column}, '0123456789')"
    return (
        f"SELECT quote(substr({column}, 1, 40)) FROM {table} "
        f"WHERE {stripped} = {column} OR {stripped} NOT GLOB '?*:?*:' LIMIT 1"
    )


SHAPES = {table: _shape_query(table, column) for table, column in CHUNK_IDS.items()}


class OutOfStep(ValueError):
    """A chunk row a keyword recall read that names no document of the index (``chunk_rows``):
    the index is out of step with itself, as only another program's change leaves it. One of
    ``DECODE_ERRORS``: the recall asks ``note_values``, whose ``_steps`` finds the row."""


# The rows of one fact agree (``reindex``): its chunk id (``<store-scope>:<doc-id>:<position>``)
# in the chunks row and in the trigram row of the same rowid, of one store, and a documents row
# of that store for the id. A row that names no document was dropped by the recall that met it,
# which answered without the fact and raised nothing. Each query gives the first row that
# disagrees (11 ms of CPU at 10k facts, 10,310 chunks; asked only after a read failed, and by doctor).
STEPS = {
    "documents_fts.chunk_id": (
        "SELECT quote(substr(f.c2, 1, 40)) FROM documents_fts_content f LEFT JOIN chunks k ON k.rowid = f.id "
        "WHERE k.id IS NOT f.c2 OR k.resource_name IS NOT f.c1 LIMIT 1",
        "names no chunk of its store",
    ),
    "chunks.id": (
        "SELECT quote(substr(id, 1, 40)) FROM chunks "
        "WHERE id IS NOT substr(id, 1, 13) || document_id || ':' || position LIMIT 1",
        "does not name its document and position",
    ),
    "chunks.document_id": (
        "SELECT quote(substr(k.document_id, 1, 40)) FROM chunks k LEFT JOIN documents d "
        "ON d.kind = k.kind AND d.resource_name = k.resource_name AND d.id = k.document_id "
        "WHERE d.rowid IS NULL LIMIT 1",
        "names no document of its store",
    ),
}


def _steps(conn: apsw.Connection) -> str | None:
    """The first chunk row that names no document of the index (``STEPS``), said as a problem."""
    for column, (sql, said) in STEPS.items():
        for (held,) in apsw.Connection.execute(conn, sql):
            return f"{column} {held} {said}"
    return None


def _shapes(conn: apsw.Connection) -> str | None:
    """The first chunk id that is not one, said as a problem, or None."""
    for table, sql in SHAPES.items():
        for (held,) in apsw.Connection.execute(conn, sql):
            return f"{table}.{CHUNK_IDS[table]}: {held}, which is no chunk id"
    return None


def _time_problem(value: str) -> str | None:
    try:
        when = datetime.fromisoformat(value)
        when.timestamp()
    except DECODE_ERRORS as exc:
        return f"not a time ({exc})"
    return "a time with no zone" if when.tzinfo is None else None


def _times(conn: apsw.Connection) -> str | None:
    rows = apsw.Connection.execute(conn, f"SELECT rowid, {', '.join(TIMES)} FROM documents")
    for rowid, *values in rows:
        for column, value in zip(TIMES, values, strict=True):
            problem = _time_problem(value)
            if problem is not None:
                return f"documents.{column}: {problem} in row {rowid}"
    return None


def _undecodable_query(table: str, columns: dict[str, str]) -> str:
    """Each row's text columns' bytes (NULL as none), for ``_undecodable`` (no rowid: a table
    may be WITHOUT ROWID)."""
    texts = [c for c, kind in columns.items() if kind in (TEXT, TEXT_OR_NULL)]
    return f"SELECT {', '.join(f'CAST({c} AS BLOB)' for c in texts)} FROM {table}"


UNDECODABLE = {table: _undecodable_query(table, columns) for table, columns in COLUMNS.items()}


def _undecodable(conn: apsw.Connection) -> str | None:
    """The first text value that is not UTF-8 (bytes another program stored as TEXT: apsw's
    read of it raised a raw ``UnicodeDecodeError``), said as a problem, or None. Each row's
    values are checked as one text, a line break between them (a lead byte before it is no
    UTF-8), and only a row that fails is looked at value by value."""
    for table, sql in UNDECODABLE.items():
        names = [c for c, kind in COLUMNS[table].items() if kind in (TEXT, TEXT_OR_NULL)]
        for values in apsw.Connection.execute(conn, sql):
            try:
                b"\n".join(v or b"" for v in values).decode("utf-8")
            except UnicodeDecodeError:
                for column, value in zip(names, values, strict=True):
                    try:
                        (value or b"").decode("utf-8")
                    except UnicodeDecodeError as exc:
                        return f"{table}.{column}: text that is not UTF-8 ({exc.reason})"
    return None


def values_problem(conn: apsw.Connection) -> str | None:
    """The first value in the index open on ``conn`` that is not what coffer writes into its
    column (a blob for a text, a time no read can place), or the first chunk row naming no
    document (``STEPS``), said as a problem; None when there is
    none (and when SQLite cannot read the rows: damage is noted where a read meets it)."""
    try:
        for table, sql in QUERIES.items():
            for column, held in apsw.Connection.execute(conn, sql):
                return (
                    f"another program wrote a value into {table}.{column}: a {held} "
                    f"where the index writes {COLUMNS[table][column]}"
                )
        problem = _undecodable(conn) or _shapes(conn) or _times(conn)
        if problem is None:
            step = _steps(conn)
            return None if step is None else f"the index is out of step with itself: {step}"
    except apsw.Error:
        return None
    return f"another program wrote a value into {problem}"


def clash(failed: apsw.ConstraintError) -> str | None:
    """A UNIQUE (or primary key) ``ConstraintError`` met by an index write on a whole schema, said
    as a problem; None for another constraint. The index's own writes replace a file's rows
    whole, so they clash only with rows another program changed (a document's id or path
    rewritten: the file's rows, indexed again, met its chunks or its id): a raw error on every
    read that had a file to index, until the file is rebuilt."""
    # apsw sets ``extendedresult`` on each of its exceptions; its type stubs do not declare it.
    code = getattr(failed, "extendedresult", None)
    if code not in (apsw.SQLITE_CONSTRAINT_UNIQUE, apsw.SQLITE_CONSTRAINT_PRIMARYKEY):
        return None
    return f"its rows clash with what the files give, as another program's change leaves them ({failed})"


def note_values(db: _Noting) -> str | None:
    """Note a value another program wrote into the index open on ``db`` as damage, for the next
    read to move the file aside and rebuild it (``IndexDB.note_damage``); returns what was wrong,
    or None. Read past ``_Connection``'s checks, under ``db.busy``."""
    with db.busy:
        problem = values_problem(db.current())
    if problem is not None and db.generation == db.shared.generation:
        db.shared.damaged = problem
        log.warning("index %s: %s; it is rebuilt from the files", db.path, problem)
    return problem


class _Reads(Protocol):
    @property
    def index(self) -> Any: ...


S = TypeVar("S", bound=_Reads)
P = ParamSpec("P")
R = TypeVar("R")


def read_again(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """A read (``Facts.list_facts``, ``get_fact``) run again once when it failed on a value
    another program wrote into the index (``note_values``), or on rows that clash with a file's
    (``clash``): its refresh then rebuilds the index.
    The error of a read with no such value behind it is its own, raised as it was."""

    def again(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except DECODE_ERRORS:
            if note_values(self.index.reader_db) is None:
                raise
        except IndexUnavailable as exc:  # its refresh met rows that clash (``clash``)
            if exc.backend != "sqlite" or not self.index.db.needs_repair():
                raise
        return method(self, *args, **kwargs)

    # update_wrapper, not the ``wraps`` decorator: ``again`` keeps its own type for mypy.
    functools.update_wrapper(again, method)
    return again

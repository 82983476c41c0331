"""One read transaction, and what the reads in it may keep for the next one while the index is unchanged.

A keyword recall in a long-lived process (a server, an agent's MCP session) reads the same rows
again and again: the chunk texts of its candidates, the ``documents`` rows of its hits, their
session neighbours, the stores' file counts. ``reading`` runs the reads of one recall in one read
transaction (one snapshot) and hands out a dict for such rows, kept from one ``reading`` to the
next on the same connection and emptied as soon as the index changed: SQLite's
``PRAGMA data_version`` moves when another connection (this process's writer, another process)
commits, ``total_changes`` when this one writes, and a reopened connection (a repair) is another
connection. Keyed on what SQLite says changed, never on time: a hand edit that reconcile indexed
is a commit like any other.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, TypeVar

import apsw

from .db import IndexDB

T = TypeVar("T")

# What the rows were read under, and the rows, per IndexDB (a reader connection per thread). The
# connection is held weakly: it references its IndexDB, and a value holding it kept its key (so
# every reader's connection, fds and rows) alive for good.
_kept: weakref.WeakKeyDictionary[
    IndexDB, tuple[tuple[weakref.ref[apsw.Connection], int, int], dict[Any, Any]]
] = weakref.WeakKeyDictionary()


class reading:  # a lower-case name: used as a function, ``with reading(db) as kept``
    """One read transaction on ``db``, and the dict of rows kept while the index is unchanged.

    Inside a transaction the caller opened (it may have written, and may roll back) the dict is
    a fresh one that is not kept. A class rather than a ``contextmanager`` generator: every
    keyword recall enters one, and the generator's frame, wrapper and ``StopIteration`` cost
    more than the transaction's own Python.
    """

    __slots__ = ("_conn", "_db", "_sized")

    def __init__(self, db: IndexDB, sized: bool = False) -> None:
        self._db = db
        self._sized = sized  # the caller's read checked the file's size a moment ago (``IndexDB.current``)
        self._conn: apsw.Connection | None = None

    def __enter__(self) -> dict[Any, Any]:
        db = self._db
        # Held until the end: a reader connection has no SQLite mutex (``IndexDB.busy``).
        db.busy.acquire()
        try:
            conn = db.current(self._sized)
            if not conn.get_autocommit():
                return {}
            conn.execute("BEGIN")
            self._conn = conn
        except BaseException:
            db.busy.release()
            raise
        try:
            # Read inside the transaction: the version and every later read see one snapshot.
            version = (weakref.ref(conn), int(conn.execute("PRAGMA data_version").get), conn.total_changes())
            kept = _kept.get(db)
            if kept is None or kept[0] != version:
                kept = _kept[db] = (version, {})
        except BaseException:
            self.__exit__(BaseException, None, None)
            raise
        return kept[1]

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        try:
            if self._conn is not None:
                self._end(failed=kind is not None)
        finally:
            self._db.busy.release()

    def _end(self, *, failed: bool) -> None:
        conn = self._conn
        assert conn is not None
        self._conn = None
        if failed:
            with suppress(apsw.Error):  # a damaged file may refuse even this; the error is the news
                conn.execute("ROLLBACK")
        elif not conn.get_autocommit():  # a read transaction: COMMIT only ends it
            conn.execute("COMMIT")


def in_list(values: Sequence[T]) -> tuple[str, list[T]]:
    """The ``?`` marks of an SQL ``IN (...)`` list of ``values``, and the values, padded with the
    first to a power of two (at least 4): SQLite prepares each statement text anew, and a list
    whose length changed from one recall to the next missed apsw's statement cache (a documents
    query with its session subqueries took 90 us prepared afresh, 40 us cached)."""
    size = 4
    while size < len(values):
        size *= 2
    padded = [*values, *[values[0]] * (size - len(values))] if values else []
    return ",".join("?" * len(padded)), padded

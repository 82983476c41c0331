"""A ``ledger.db`` another program changed or damaged, found and repaired without losing rows.

Another program's own ``distilled_sessions`` table in the ledger's place, one of the ledger's
columns or its key gone, a view or a trigger in the way, a file that is no database: each reached
``coffer distill``, the session-end hook and REST's distill as a raw ``SQLError`` (the CLI's
"unexpected"), on every call, while ``coffer doctor`` said ok. The ledger's shape is now checked
when it is opened and again when a statement on it fails, and a ledger that fails is repaired as
the index is, with one difference: the index is derived from the files and is rebuilt whole, while
the ledger is the only record of which turns of which session were sent to the model. So the
repair keeps everything it can:

- a file SQLite can read is repaired in place, in one transaction (other processes' connections
  see the new table as after any schema change): the table in the way is renamed
  ``distilled_sessions_<UTC time>`` (a view's rows are copied into such a table first), a new
  ledger table is made, and every row of the old one that has the ledger's key and status is
  carried into it (columns it lacks take their defaults);
- a file SQLite cannot read is renamed ``ledger.db.damaged-<UTC time>`` (never deleted, with its
  ``-wal`` and ``-shm``), a new one is made, and the rows that can still be read from the damaged
  file before the damage are carried into it.

What no repair can carry over (rows of a table that lost the ledger's key, or beyond the damage)
costs little for a session distilled in one run: its journal entries are named by the run, so the
next distillation finds them, records the session as done and asks no model
(``service._distill_claimed``). A session that was distilled in several runs (it grew, or is a
fork) has lost which turns each run covered; its next distillation sends them all again.
"""

from __future__ import annotations

import os
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import apsw

from .._errors import LedgerUnavailable
from .._store.files import move_aside
from .._store.lock import store_lock

TABLE = "distilled_sessions"
RUNNING_INDEX = "distilled_running"
DAMAGE = (apsw.CorruptError, apsw.NotADBError)
MAGIC = b"SQLite format 3\x00"  # the first bytes of every SQLite database file
# Every column of the ledger's table and, for a row carried over from a table that lacks it, the
# value it takes. None: a row without it means nothing (not carried over).
COLUMNS: dict[str, str | None] = {
    "agent": None,
    "session_id": None,
    "content_sha256": None,
    "status": None,
    "claimed_at": "''",
    "owner": "''",
    "distilled_at": "NULL",
    "store": "NULL",
    "insights": "0",
    "prompt_tokens": "0",
    "completion_tokens": "0",
    "message_count": "0",
    "message_digests": "''",
    "first_digest": "''",
}
KEY = ("agent", "session_id", "content_sha256")
_REPAIRS = "CREATE TABLE IF NOT EXISTS ledger_repairs (at TEXT NOT NULL, what TEXT NOT NULL)"
KEEP_REPAIRS = 20


def stamp() -> str:
    """The UTC time a repair names what it kept by (as the index's repair does)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def problem(conn: apsw.Connection, added: tuple[str, ...], *, opening: bool) -> str | None:
    """What is wrong with the shape of the ledger on ``conn``, or None. ``added``: columns an older
    ledger may lack (the open adds them: not a problem then). ``opening``: no table is no problem
    (a new file; the open makes it), where on a ledger in use it was dropped.
    Raises SQLite's damage errors (a file that is no database fails the first read)."""
    objects = {
        str(r[1]): (str(r[0]), str(r[2]))
        for r in conn.execute("SELECT type, name, tbl_name FROM sqlite_master")
    }
    kind, _ = objects.get(TABLE, ("table" if opening else "", TABLE))
    if not kind:
        return f"{TABLE} was dropped"
    if kind != "table":
        return f"{TABLE} is a {kind}, not the ledger's table"
    if TABLE in objects:
        info = [(str(r[1]), int(r[5])) for r in conn.execute(f"PRAGMA table_info({TABLE})")]
        names = {name for name, _ in info}
        if not names & set(KEY):
            return f"{TABLE} is another program's table (its columns: {', '.join(n for n, _ in info)})"
        missing = [c for c in COLUMNS if c not in names and c not in added]
        if missing:
            return f"{TABLE} lacks the ledger's columns {', '.join(missing)}"
        if tuple(name for name, pk in sorted(info, key=lambda i: i[1]) if pk) != KEY:
            return f"{TABLE}'s key is not ({', '.join(KEY)})"
    triggers = sorted(n for n, (t, on) in objects.items() if t == "trigger" and on == TABLE)
    if triggers:
        return f"a trigger the ledger does not make on {TABLE}: {', '.join(triggers)}"
    kind, on = objects.get(RUNNING_INDEX, ("index", TABLE))
    if (kind, on) != ("index", TABLE):
        return (
            f"{RUNNING_INDEX} is a {kind}"
            + (f" on {on}" if kind == "index" else "")
            + ", not the ledger's index"
        )
    return None


def _carry(conn: apsw.Connection, source: str) -> int:
    """Copy the rows of table ``source`` that have the ledger's key and status into the ledger's
    table (made already); the number copied."""
    present = {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{source}")')}
    if any(c not in present for c, default in COLUMNS.items() if default is None):
        return 0
    values = [
        c if default is None else f"coalesce({c}, {default})" if c in present else default
        for c, default in COLUMNS.items()
    ]
    conn.execute(
        f"INSERT OR IGNORE INTO {TABLE} ({', '.join(COLUMNS)}) SELECT {', '.join(values)} "
        f"FROM \"{source}\" WHERE status IN ('running', 'done')"
    )
    return conn.changes()


def record(conn: apsw.Connection, at: str, what: str) -> None:
    """Note a repair in the ledger, for ``coffer doctor`` (the last ``KEEP_REPAIRS``)."""
    with suppress(apsw.Error):  # a note that cannot be written must not undo the repair
        conn.execute(_REPAIRS)
        conn.execute("INSERT INTO ledger_repairs (at, what) VALUES (?, ?)", (at, what))
        conn.execute(
            "DELETE FROM ledger_repairs WHERE rowid NOT IN "
            f"(SELECT rowid FROM ledger_repairs ORDER BY rowid DESC LIMIT {KEEP_REPAIRS})"
        )


def repairs(conn: apsw.Connection) -> list[str]:
    """The repairs noted in the ledger, oldest first, one line each."""
    with suppress(apsw.Error):
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'ledger_repairs'").fetchone():
            return [
                f"{at}: {what}"
                for at, what in conn.execute("SELECT at, what FROM ledger_repairs ORDER BY rowid")
            ]
    return []


def repair_in_place(conn: apsw.Connection, make: str, added: tuple[str, ...], *, opening: bool) -> str | None:
    """Put the ledger's table in place of what is in the way (see the module doc), in one immediate
    transaction; what was done, or None when the shape is whole (another process repaired it).
    ``make``: the statements that make the ledger's table and index."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = problem(conn, added, opening=opening)
        if found is None:
            conn.execute("ROLLBACK")
            return None
        at = stamp()
        kept = f"{TABLE}_{at}"
        objects = {str(r[1]): str(r[0]) for r in conn.execute("SELECT type, name FROM sqlite_master")}
        running = objects.get(RUNNING_INDEX)
        if running == "table":
            conn.execute(f'ALTER TABLE {RUNNING_INDEX} RENAME TO "{RUNNING_INDEX}_{at}"')
        elif running is not None:  # an index, a view or a trigger: no rows of their own
            conn.execute(f"DROP {running.upper()} {RUNNING_INDEX}")
        kind = objects.get(TABLE)
        if kind is None:  # dropped: nothing of it left to keep
            kept = ""
        elif kind == "view":
            try:  # its rows now, as a table: a view of rows elsewhere in the file keeps them there too
                conn.execute(f'CREATE TABLE "{kept}" AS SELECT * FROM {TABLE}')
            except apsw.SQLError:  # a view of tables that are not there: nothing to keep
                kept = ""
            conn.execute(f"DROP VIEW {TABLE}")
        elif kind == "table":
            # Legacy: the rename touches nothing else in the schema (another program's triggers
            # and views naming the table may not parse, and would fail a full rename).
            conn.execute("PRAGMA legacy_alter_table=ON")
            try:
                conn.execute(f'ALTER TABLE {TABLE} RENAME TO "{kept}"')
            finally:
                conn.execute("PRAGMA legacy_alter_table=OFF")
        conn.execute(make)
        carried = _carry(conn, kept) if kept else 0
        what = (
            f"ledger.db: {found}; "
            + (f"kept as table {kept} in ledger.db" if kept else "nothing in it to keep")
            + f", {carried} row{'' if carried == 1 else 's'} carried over"
        )
        record(conn, at, what)
        conn.execute("COMMIT")
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    return what


def move_damaged(path: Path, ino: int, lock: Path) -> tuple[str, Path] | None:
    """Rename the damaged ledger file (and its -wal and -shm) aside, unless another process did so
    already (the file at ``path`` is no longer inode ``ino``): the repair's time and the file kept,
    or None."""
    with store_lock(lock):
        try:
            if os.stat(path).st_ino != ino:
                return None
        except FileNotFoundError:
            return None
        at = stamp()
        target = path.with_name(f"{path.name}.damaged-{at}")
        move_aside(path, target, suffixes=("-wal", "-shm"))
        return at, target


def salvage(conn: apsw.Connection, damaged: Path) -> int:
    """Carry into the ledger on ``conn`` the rows of the damaged file that can still be read, up to
    the damage; the number carried."""
    try:
        old = apsw.Connection(str(damaged), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return 0
    try:
        rows = readable_rows(old)
    finally:
        with suppress(apsw.Error):
            old.close()
    return carry_rows(conn, rows)


def readable_rows(old: apsw.Connection) -> list[tuple[object, ...]]:
    """The ledger rows ``old`` can still read (up to the damage), each with every column of
    ``COLUMNS`` (None for one its table lacks)."""
    rows: list[tuple[object, ...]] = []
    try:
        present = {str(r[1]) for r in old.execute(f"PRAGMA table_info({TABLE})")}
        if all(c in present for c, default in COLUMNS.items() if default is None):
            values = [c if c in present else (default or "NULL") for c, default in COLUMNS.items()]
            for row in old.execute(
                f"SELECT {', '.join(values)} FROM {TABLE} WHERE status IN ('running', 'done')"
            ):
                rows.append(row)
    except apsw.Error:  # the damage: what was read before it is kept
        pass
    return rows


def carry_rows(conn: apsw.Connection, rows: list[tuple[object, ...]]) -> int:
    """Insert ``readable_rows``' rows into the ledger on ``conn`` (none that it has already); the
    number inserted."""
    names = list(COLUMNS)
    marks = ", ".join("?" if COLUMNS[c] is None else f"coalesce(?, {COLUMNS[c]})" for c in names)
    before = conn.total_changes()
    with conn:
        conn.executemany(f"INSERT OR IGNORE INTO {TABLE} ({', '.join(names)}) VALUES ({marks})", rows)
    return conn.total_changes() - before


def is_sqlite(path: Path) -> bool:
    """True when the file at ``path`` begins as every SQLite database does (16 bytes read), or is
    empty (as SQLite takes it: a new database whose pages are all in its -wal still)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) in (MAGIC, b"")
    except OSError:
        return False


def unusable(path: Path, busy_timeout_ms: int, exc: BaseException) -> LedgerUnavailable:
    """``exc``, an error on the ledger at ``path`` that is not its shape nor damage it could
    repair, as said to the caller."""
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        reason = (
            f"another process has held its write lock for over {busy_timeout_ms} ms "
            "(a long write; busy_timeout_ms says how long to wait)"
        )
    elif isinstance(exc, OSError):
        reason = f"cannot open it: {exc.strerror or exc}"
        if path.is_symlink():  # a link to nothing: never made through (it would be outside the home)
            reason += f" (a symbolic link to {os.readlink(path)})"
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return LedgerUnavailable(str(path), reason)

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
  see the new table as after any schema change): each of the ledger's tables in the way
  (``distilled_sessions``, ``left_sessions``) is renamed ``<table>_<UTC time>`` (a view's rows are
  copied into such a table first), a new table is made, and every row of the old one that has the
  table's key (and status) is carried into it (columns it lacks take their defaults); a table
  dropped under a running process is made again;
- a file SQLite cannot read (or another program's SQLite file, ``foreign``; or one whose pages past
  the first are damaged, met by the first statement that reads them) is renamed
  ``ledger.db.damaged-<UTC time>`` (never deleted, with its ``-wal`` and ``-shm``), a new one is
  made, and the rows of each table that can still be read from the damaged file before the damage
  are carried into it.

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
from .ledger_schema import (
    APPLICATION_ID,
    KEY,
    LEFT,
    LEFT_KEY,
    LEFT_SQL,
    OWNED,
    REPAIRS,
    RUNNING_INDEX,
    TABLE,
    WHERE,
    is_ours,
)

DAMAGE = (apsw.CorruptError, apsw.NotADBError)
MAGIC = b"SQLite format 3\x00"  # the first bytes of every SQLite database file
_REPAIRS = f"CREATE TABLE IF NOT EXISTS {REPAIRS} (at TEXT NOT NULL, what TEXT NOT NULL)"
KEEP_REPAIRS = 20


def stamp() -> str:
    """The UTC time a repair names what it kept by (as the index's repair does)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


class NotLedger(apsw.NotADBError):
    """The file at the ledger's path is another program's SQLite file: damage, moved aside whole."""


def reason(exc: BaseException) -> str:
    """What damage ``exc`` says, for the repair's note."""
    return str(exc) if isinstance(exc, NotLedger) else f"{type(exc).__name__}: {exc}"


def foreign(conn: apsw.Connection, added: tuple[str, ...]) -> str | None:
    """Why the file on ``conn`` is another program's SQLite file rather than a ledger (an index.db, a
    notes app's file copied over it), or None. A file with the ledger's ``APPLICATION_ID`` is the
    ledger (another program's table in the place of one of its own is repaired in place, see
    ``problem``), unless it holds none of the ledger's tables and some of another program's.
    A file without it (0: every plain SQLite file, and a ledger an older coffer made) is the
    ledger only when it is exactly the ledger's shape: the ledger's tables and nothing else, none
    of them changed (``added``: columns an older ledger lacks), or no table at all (a new file).
    Raises SQLite's damage errors."""
    app = int(conn.execute("PRAGMA application_id").fetchall()[0][0] or 0)
    if app not in (0, APPLICATION_ID):
        return f"another program's SQLite file (application_id {app:#x})"
    names = [
        str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    ]
    theirs = sorted(n for n in names if not is_ours(n))
    if theirs and (app == 0 or TABLE not in names):
        return f"another program's SQLite file (its tables: {', '.join(theirs)})"
    if app == 0:
        # Another program's table under a ledger's name: without the ledger's id the file is theirs,
        # and a repair in place would write the ledger into it.
        found = problem(conn, added, opening=True)
        if found is not None:
            return f"another program's SQLite file (no application_id; {found})"
    return None


def _table_problem(
    conn: apsw.Connection,
    objects: dict[str, tuple[str, str]],
    name: str,
    key: tuple[str, ...],
    added: tuple[str, ...],
    opening: bool,
) -> str | None:
    kind, _ = objects.get(name, ("table" if opening else "", name))
    if not kind:
        return f"{name} was dropped"
    if kind != "table":
        return f"{name} is a {kind}, not the ledger's table"
    if name in objects:
        info = [(str(r[1]), int(r[5])) for r in conn.execute(f"PRAGMA table_info({name})")]
        names = {column for column, _ in info}
        if not names & set(key):
            return f"{name} is another program's table (its columns: {', '.join(n for n, _ in info)})"
        missing = [c for c in OWNED[name] if c not in names and c not in added]
        if missing:
            return f"{name} lacks the ledger's columns {', '.join(missing)}"
        if tuple(column for column, pk in sorted(info, key=lambda i: i[1]) if pk) != key:
            return f"{name}'s key is not ({', '.join(key)})"
    triggers = sorted(n for n, (t, on) in objects.items() if t == "trigger" and on == name)
    if triggers:
        return f"a trigger the ledger does not make on {name}: {', '.join(triggers)}"
    return None


def problems(conn: apsw.Connection, added: tuple[str, ...], *, opening: bool) -> dict[str, str]:
    """What is wrong with the shape of each table the ledger owns on ``conn`` (by table; empty: none).
    ``added``: columns an older ledger may lack (the open adds them: not a problem then).
    ``opening``: no table is no problem (a new file; the open makes it), where on a ledger in use it
    was dropped. Raises SQLite's damage errors (a file that is no database fails the first read)."""
    objects = {
        str(r[1]): (str(r[0]), str(r[2]))
        for r in conn.execute("SELECT type, name, tbl_name FROM sqlite_master")
    }
    found: dict[str, str] = {}
    why = _table_problem(conn, objects, TABLE, KEY, added, opening)
    kind, on = objects.get(RUNNING_INDEX, ("index", TABLE))
    if why is None and (kind, on) != ("index", TABLE):
        why = (
            f"{RUNNING_INDEX} is a {kind}"
            + (f" on {on}" if kind == "index" else "")
            + ", not the ledger's index"
        )
    if why is not None:
        found[TABLE] = why
    why = _table_problem(conn, objects, LEFT, LEFT_KEY, (), opening)
    if why is not None:
        found[LEFT] = why
    return found


def problem(conn: apsw.Connection, added: tuple[str, ...], *, opening: bool) -> str | None:
    """What is wrong with the ledger's shape on ``conn`` (``problems``, in one line), or None."""
    return "; ".join(problems(conn, added, opening=opening).values()) or None


def _carry(conn: apsw.Connection, source: str, table: str) -> int:
    """Copy the rows of table ``source`` that have ``table``'s key (and, for ``distilled_sessions``,
    its status) into ``table`` (made already); the number copied."""
    columns = OWNED[table]
    present = {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{source}")')}
    if any(c not in present for c, default in columns.items() if default is None):
        return 0
    values = [
        c if default is None else f"coalesce({c}, {default})" if c in present else default
        for c, default in columns.items()
    ]
    conn.execute(
        f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} "
        f'FROM "{source}" WHERE {WHERE[table]}'
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


def _set_aside(conn: apsw.Connection, kinds: dict[str, str], name: str, at: str) -> str:
    """Take ``name`` (the ledger's table, or what is in its place) out of the way; the table its rows
    are kept in, or "" when nothing of it is kept."""
    kept = f"{name}_{at}"
    kind = kinds.get(name)
    if kind == "view":
        try:  # its rows now, as a table: a view of rows elsewhere in the file keeps them there too
            conn.execute(f'CREATE TABLE "{kept}" AS SELECT * FROM {name}')
        except apsw.SQLError:  # a view of tables that are not there: nothing to keep
            kept = ""
        conn.execute(f"DROP VIEW {name}")
        return kept
    if kind == "table":
        # Legacy: the rename touches nothing else in the schema (another program's triggers
        # and views naming the table may not parse, and would fail a full rename).
        conn.execute("PRAGMA legacy_alter_table=ON")
        try:
            conn.execute(f'ALTER TABLE {name} RENAME TO "{kept}"')
        finally:
            conn.execute("PRAGMA legacy_alter_table=OFF")
        return kept
    if kind is not None:  # an index or a trigger under the table's name: no rows of its own
        conn.execute(f"DROP {kind.upper()} {name}")
    return ""


def repair_in_place(conn: apsw.Connection, make: str, added: tuple[str, ...], *, opening: bool) -> str | None:
    """Put the ledger's tables in place of what is in the way (see the module doc), in one immediate
    transaction; what was done, or None when the shape is whole (another process repaired it).
    ``make``: the statements that make ``distilled_sessions`` and its index."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = problems(conn, added, opening=opening)
        if not found:
            conn.execute("ROLLBACK")
            return None
        at = stamp()
        kinds = {str(r[1]): str(r[0]) for r in conn.execute("SELECT type, name FROM sqlite_master")}
        said = []
        for table, why in found.items():
            if table == TABLE:
                running = kinds.get(RUNNING_INDEX)
                if running == "table":
                    conn.execute(f'ALTER TABLE {RUNNING_INDEX} RENAME TO "{RUNNING_INDEX}_{at}"')
                elif running is not None:  # an index, a view or a trigger: no rows of their own
                    conn.execute(f"DROP {running.upper()} {RUNNING_INDEX}")
            kept = _set_aside(conn, kinds, table, at)
            conn.execute(make if table == TABLE else LEFT_SQL)
            carried = _carry(conn, kept, table) if kept else 0
            said.append(
                f"{why}; "
                + (f"kept as table {kept} in ledger.db" if kept else "nothing in it to keep")
                + f", {carried} row{'' if carried == 1 else 's'} carried over"
            )
        what = "ledger.db: " + "; ".join(said)
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


Kept = dict[str, list[tuple[object, ...]]]
"""Rows read from a damaged ledger, by the table they go to."""


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


def readable_rows(old: apsw.Connection) -> Kept:
    """The rows of each table the ledger owns that ``old`` can still read (up to the damage in that
    table: another table's damage stops none of them), each with every column of the table (None
    for one its table in ``old`` lacks)."""
    kept: Kept = {}
    for table, columns in OWNED.items():
        rows: list[tuple[object, ...]] = []
        try:
            present = {str(r[1]) for r in old.execute(f"PRAGMA table_info({table})")}
            if all(c in present for c, default in columns.items() if default is None):
                values = [c if c in present else (default or "NULL") for c, default in columns.items()]
                for row in old.execute(f"SELECT {', '.join(values)} FROM {table} WHERE {WHERE[table]}"):
                    rows.append(row)
        except apsw.Error:  # the damage: what was read before it is kept
            pass
        if rows:
            kept[table] = rows
    return kept


def carry_rows(conn: apsw.Connection, kept: Kept) -> int:
    """Insert ``readable_rows``' rows into the ledger on ``conn`` (none that it has already); the
    number inserted."""
    before = conn.total_changes()
    with conn:
        for table, rows in kept.items():
            columns = OWNED[table]
            marks = ", ".join("?" if columns[c] is None else f"coalesce(?, {columns[c]})" for c in columns)
            conn.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
    return conn.total_changes() - before


def header(path: Path, stamped: bool) -> tuple[str | None, bool]:
    """A look at the first 72 bytes of the file at ``path`` (empty: a new database whose pages are
    all in its -wal still, as SQLite takes it): what says it is no ledger (None: nothing), and
    whether it carries the ledger's ``APPLICATION_ID``. ``stamped``: it did when last looked at, so
    a header without it now is another file copied over the ledger, not a checkpoint (one never
    takes the id away; before the open's checkpoint copied it in, a header may lack it)."""
    try:
        with open(path, "rb") as f:
            head = f.read(72)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}", stamped
    if not head:
        return None, stamped
    if not head.startswith(MAGIC):
        return "not an SQLite file", stamped
    app = int.from_bytes(head[68:72], "big")
    if app == APPLICATION_ID:
        return None, True
    if app or stamped:
        return f"another program's SQLite file (application_id {app:#x})", stamped
    return None, stamped


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

"""The tables ``ledger.db`` owns, as the ledger makes them and as its repair checks and refills them.

``distilled_sessions`` (what was distilled, see ``ledger``), ``left_sessions`` (session ends left
``in_progress``, for the next session start or end to pick up) and ``ledger_repairs`` (what a repair
did, for ``coffer doctor``). The file's header carries ``APPLICATION_ID``: a look at its first 72
bytes tells the ledger from another program's SQLite file copied over it (``ledger_repair.header``).
"""

from __future__ import annotations

from contextlib import suppress

import apsw

# "CFFL" (index.db's is "CFFR"): set on every ledger at its open, so a file that lost it was replaced.
APPLICATION_ID = 0x4346464C
TABLE = "distilled_sessions"
RUNNING_INDEX = "distilled_running"
LEFT = "left_sessions"
REPAIRS = "ledger_repairs"

SCHEMA = """
CREATE TABLE IF NOT EXISTS distilled_sessions (
    agent TEXT NOT NULL,
    session_id TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done')),
    claimed_at TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    distilled_at TEXT,
    store TEXT,
    insights INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    message_digests TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (agent, session_id, content_sha256)
);
"""
# Columns added after the first release: a ledger written by an older version gets them on open
# (rows keep the defaults: no count, no digests; see ``increment``).
ADDED_COLUMNS = (
    ("message_count", "INTEGER NOT NULL DEFAULT 0"),
    ("message_digests", "TEXT NOT NULL DEFAULT ''"),
    ("first_digest", "TEXT NOT NULL DEFAULT ''"),
)
ADDED = tuple(name for name, _ in ADDED_COLUMNS)
# Running claims are few; a claim looks for its family's among them without reading the done rows
# (a ledger of 10,000 sessions is ~40 MB of digests).
RUNNING_INDEX_SQL = (
    f"CREATE INDEX IF NOT EXISTS {RUNNING_INDEX} ON {TABLE} (agent, store, first_digest) "
    "WHERE status = 'running'"
)
# Session ends that answered in_progress: the next start or end of one of the agent's sessions distils them.
LEFT_SQL = (
    f"CREATE TABLE IF NOT EXISTS {LEFT} (agent TEXT NOT NULL, session_id TEXT NOT NULL, "
    "cwd TEXT, left_at TEXT NOT NULL, PRIMARY KEY (agent, session_id))"
)
# The statements that make ``distilled_sessions`` whole in a file that has none (a repair's new table).
MAKE = ";\n".join(
    [SCHEMA.strip().rstrip(";")]
    + [f"ALTER TABLE {TABLE} ADD COLUMN {n} {d}" for n, d in ADDED_COLUMNS if f" {n} " not in SCHEMA]
    + [RUNNING_INDEX_SQL]
)

# Every column of each table and, for a row carried over from a table that lacks it, the value it
# takes. None: a row without it means nothing (not carried over).
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
LEFT_COLUMNS: dict[str, str | None] = {"agent": None, "session_id": None, "cwd": "NULL", "left_at": "''"}
LEFT_KEY = ("agent", "session_id")
# What each table's carried rows must hold (a ``distilled_sessions`` row of another status means nothing).
WHERE = {TABLE: "status IN ('running', 'done')", LEFT: "1"}
OWNED = {TABLE: COLUMNS, LEFT: LEFT_COLUMNS}


def is_ours(name: str) -> bool:
    """True for a schema object the ledger makes or keeps (a table a repair kept aside included)."""
    return name.startswith((TABLE, RUNNING_INDEX, LEFT, REPAIRS, "sqlite_"))


def make(conn: apsw.Connection) -> None:
    """Make every table the ledger owns (or bring an older one up to date) and its index."""
    conn.execute(SCHEMA)
    present = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({TABLE})")}
    for name, decl in ADDED_COLUMNS:
        if name not in present:
            conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {name} {decl}")
    conn.execute(RUNNING_INDEX_SQL)
    conn.execute(LEFT_SQL)


def stamp(conn: apsw.Connection) -> None:
    """Write ``APPLICATION_ID`` into the header of a ledger that lacks it (a new one, or one an older
    version made) and copy it into the file now: the header look reads the file, not the -wal."""
    found = conn.execute("PRAGMA application_id").fetchall()[0][0]
    if found != APPLICATION_ID:
        # A ledger only readable here (or held by a long write) is read as before, unstamped: the
        # header look then tells garbage from it, not another SQLite file.
        with suppress(apsw.ReadOnlyError, apsw.BusyError):
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

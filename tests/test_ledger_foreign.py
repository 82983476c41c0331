"""A file without the ledger's ``application_id`` (0: what every plain SQLite file has) in
ledger.db's place: the ledger's shape decides whether it is a ledger an older coffer made (adopted,
stamped) or another program's file (moved aside untouched). Real SQLite files written by another
process, as ``cp`` would put them there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from coffer_memory._transcripts.ledger import Ledger

AGENT = "claude-code"
# Another program's files that hold a table named as the ledger's: each passed the look at the
# ``application_id`` (0) and its tables, and the ledger wrote its rows into them.
FOREIGN = {
    "own-distilled-sessions": "CREATE TABLE distilled_sessions (id INTEGER PRIMARY KEY, note TEXT); "
    "INSERT INTO distilled_sessions (note) VALUES ('theirs'); "
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine');",
    "ledger-tables-and-its-own": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); "
    "INSERT INTO notes (body) VALUES ('mine');",
}
# The first release's ledger: no added columns, no running index, no left_sessions, no id.
OLDEST = (
    "CREATE TABLE distilled_sessions (agent TEXT NOT NULL, session_id TEXT NOT NULL, "
    "content_sha256 TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('running', 'done')), "
    "claimed_at TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', distilled_at TEXT, store TEXT, "
    "insights INTEGER NOT NULL DEFAULT 0, prompt_tokens INTEGER NOT NULL DEFAULT 0, "
    "completion_tokens INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (agent, session_id, content_sha256)); "
    "INSERT INTO distilled_sessions (agent, session_id, content_sha256, status, claimed_at, insights) "
    "VALUES ('claude-code', 'old-session', 'abc', 'done', '2025-01-01T00:00:00+00:00', 3);"
)


def another_process(code: str, *args: object) -> None:
    """Run ``code`` in another Python process (``sys.argv[1:]`` = ``args``), as another program."""
    subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, timeout=60)


def write_sqlite(path: Path, sql: str) -> None:
    """A plain SQLite file (``application_id`` 0, rollback journal) made by another process."""
    another_process(
        "import sys, apsw; c = apsw.Connection(sys.argv[1]); c.execute(sys.argv[2]); c.close()", path, sql
    )


def unstamped_ledger(path: Path, left: str) -> None:
    """A ledger as an older coffer left it (no ``application_id``), with ``left`` a left session."""
    ledger = Ledger(path)
    ledger.leave(AGENT, left, None)
    ledger.close()
    another_process(
        "import sys, apsw; c = apsw.Connection(sys.argv[1]); c.execute('PRAGMA application_id=0')\n"
        "c.execute('PRAGMA wal_checkpoint(TRUNCATE)'); c.close()",
        path,
    )


def names(path: Path) -> list[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        ]
    finally:
        conn.close()


@pytest.mark.parametrize("how", sorted(FOREIGN))
def test_another_programs_file_with_the_ledgers_table_names_is_moved_aside_untouched(
    tmp_path: Path, how: str
) -> None:
    """Another program's SQLite file (``application_id`` 0) holding a ``distilled_sessions`` table
    copied over ledger.db: it passed as the ledger (its table repaired in place, or the file used
    as it was), and the ledger wrote its tables and rows into the other program's file. It is moved
    aside as it was, and a new ledger (stamped) is made in its place."""
    path = tmp_path / "ledger.db"
    if how == "ledger-tables-and-its-own":  # a copy of a ledger (id 0) another program added to
        unstamped_ledger(path, "s1")
    write_sqlite(path, FOREIGN[how])
    before = path.read_bytes()
    ledger = Ledger(path)
    try:
        ledger.leave(AGENT, "s2", None)
        assert ("s2", None) in ledger.left(AGENT)
        (line,) = ledger.check()
        if how == "ledger-tables-and-its-own":  # the ledger's rows in it are carried over
            assert ledger.left(AGENT)[0] == ("s1", None)
    finally:
        ledger.close()
    assert "another program's SQLite file" in line and "ledger.db.damaged-" in line, line
    (kept,) = tmp_path.glob("ledger.db.damaged-*[0-9]Z")
    assert kept.read_bytes() == before  # not written into
    assert "notes" not in names(path)
    assert int.from_bytes(path.read_bytes()[68:72], "big") == 0x4346464C


def test_a_ledger_of_the_first_release_is_adopted_and_stamped(tmp_path: Path) -> None:
    """A ledger made by a coffer from before the ``application_id`` (and before its added columns
    and ``left_sessions``) is the ledger: read, brought up to date and stamped, nothing moved."""
    path = tmp_path / "ledger.db"
    write_sqlite(path, OLDEST)
    ledger = Ledger(path)
    try:
        (entry,) = ledger.entries(AGENT, "old-session")
        assert (entry.status, entry.insights) == ("done", 3)
        ledger.leave(AGENT, "s1", None)
        assert ledger.left(AGENT) == [("s1", None)]
        assert ledger.check() == []
    finally:
        ledger.close()
    assert list(tmp_path.glob("ledger.db.damaged-*")) == []
    assert int.from_bytes(path.read_bytes()[68:72], "big") == 0x4346464C

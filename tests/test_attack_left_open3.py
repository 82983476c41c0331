"""What fix24 left open (a constraint written into one of index.db's tables, a ledger another
process holds or overwrites, a trigger planted under a running process), pinned: each test here
failed before its fix. Real homes, real SQLite files, ``coffer`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest
from agent_samples import AgentSamples
from conftest import poll
from http_scripted import ScriptedServer
from test_attack_home_entries import _coffer
from test_distill import llm as llm
from test_distill import samples as samples
from test_distill import write_llm_config

from coffer_memory import MemoryService, Settings
from coffer_memory._index import shape

# Another program's constraint in the SQL of one of the index's tables: written into the schema
# (``PRAGMA writable_schema``, as a tool that "fixes" a schema does), or the table made again with it.
CONSTRAINED = {
    "check-chunks": ("chunks", ", CHECK (position < 0))"),
    "check-documents": ("documents", ", CHECK (title != 'kettle'))"),
    "unique-remade": ("chunks", None),
}
# The chunks table made again, with its rows and its index, and one more constraint: a second
# fact of a store refused.
REMADE = """
CREATE TABLE chunks_new (id TEXT PRIMARY KEY, document_id TEXT NOT NULL, kind TEXT NOT NULL,
    resource_name TEXT NOT NULL, position INTEGER NOT NULL, tokens TEXT, UNIQUE (kind, resource_name));
INSERT INTO chunks_new SELECT * FROM chunks;
DROP TABLE chunks;
ALTER TABLE chunks_new RENAME TO chunks;
CREATE INDEX idx_chunks_document ON chunks(document_id);
"""


def _constrain(index: Path, how: str) -> None:
    table, tail = CONSTRAINED[how]
    conn = apsw.Connection(str(index))
    if tail is None:
        conn.execute(REMADE)
        conn.close()
        return
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    conn.close()
    writable_schema(index, table, sql.rstrip().removesuffix(")") + tail)


def writable_schema(index: Path, name: str, sql: str) -> None:
    """Write ``sql`` as the SQL of the table ``name`` of ``index`` (``PRAGMA writable_schema``)."""
    conn = apsw.Connection(str(index))
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (sql, name))
    # As SQLite's docs ask of such an edit: other connections then read the schema again.
    (cookie,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute(f"PRAGMA schema_version = {cookie + 1}")
    conn.execute("PRAGMA writable_schema=OFF")
    conn.close()


@pytest.mark.parametrize("how", sorted(CONSTRAINED))
def test_a_constraint_written_into_an_index_table_is_damage(tmp_home: Path, how: str) -> None:
    """A ``CHECK`` (or a ``UNIQUE``) another program wrote into the SQL of one of the index's
    tables: ``remember`` made its file durable but left it unindexed, and ``reindex``, ``recall``
    and ``doctor`` died with a raw ``ConstraintError`` (the CLI's "unexpected"). The shape check
    compares each table's SQL with the one the migrations make: such a file is moved aside and
    rebuilt from the files, and the fact written meanwhile is found."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    _constrain(tmp_home / "index.db", how)
    proc = _coffer(tmp_home, "remember", "The kettle whistles.", "--store", "global", "--title", "kettle")
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    for args in (("reindex",), ("recall", "kettle whistles", "--store", "global", "--mode", "keyword")):
        proc = _coffer(tmp_home, *args)
        assert proc.returncode == 0, proc.stderr
        assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    assert "kettle" in proc.stdout
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("repaired: ")]
    assert CONSTRAINED[how][0] in line and "moved to index.db.corrupt-" in line


@pytest.mark.parametrize("how", sorted(CONSTRAINED))
def test_a_constraint_written_under_a_running_service_is_met_as_damage(tmp_home: Path, how: str) -> None:
    """The same written while a service holds the index open: the write that meets it is durable
    (its receipt says the index is pending), never a raw ``ConstraintError``; the next read moves
    the file aside, rebuilds it and finds the fact."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        _constrain(tmp_home / "index.db", how)
        kettle = svc.remember("The kettle whistles.", title="kettle", scope="global")
        assert kettle.receipt is not None
        found = {h.title for h in svc.recall("kettle whistles", stores=["global"], mode="keyword").hits}
        assert found == {"kettle"}
        (repair,) = svc.doctor().index_repairs
        assert CONSTRAINED[how][0] in repair


def test_the_index_knows_the_sql_its_migrations_give_each_table(tmp_home: Path) -> None:
    """``shape.TABLE_SQL`` is what the migrations make: a migration that changed a table without
    saying so there would have every index moved aside (and rebuilt) at its next open."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        made = dict(svc.db.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    found = {name: shape.table_sql(made.get(name)) for name in shape.TABLE_SQL}
    assert found == shape.TABLE_SQL, {n: f"{c:#010x}" for n, c in found.items()}
    assert set(shape.TABLE_SQL) == {*shape.PLAIN_TABLES, *shape.FTS_TABLES}


# Another process's long write in ledger.db: its write lock held until the test lets it go.
HOLD = (
    "import sys, apsw; c = apsw.Connection(sys.argv[1]); c.execute('BEGIN IMMEDIATE'); "
    "c.execute('CREATE TABLE their_long_write (x)'); print('held', flush=True); sys.stdin.read()"
)


@contextmanager
def _held(path: Path) -> Iterator[None]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)


BUSY_MS = "300"  # the busy timeout the faces below run with (``busy_timeout_ms``)


def test_a_ledger_another_process_holds_is_a_typed_error_on_every_face(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """ledger.db's write lock held by another process (a long write) past the busy timeout:
    ``coffer distill`` died with "unexpected BusyError: database is locked", the session-end hook
    logged the same raw words, and REST's distill operation failed as INTERNAL. Each now says
    ``INDEX_UNAVAILABLE`` naming ledger.db and why (another process holds it), the session left
    for the next attempt, which distills it once the lock is let go."""
    write_llm_config(tmp_home, llm.url)
    first, target = [e for e in samples.expected if e.project_path == str(samples.project_dir)][:2]
    with MemoryService(tmp_home) as svc:  # the ledger is made, as any distillation makes it
        assert svc.distill_session(first.agent, first.session_id).status == "distilled"
    ledger = tmp_home / "ledger.db"
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_BUSY_TIMEOUT_MS": BUSY_MS}
    with _held(ledger):
        proc = subprocess.run(
            [sys.executable, "-m", "coffer_memory", "distill", target.session_id, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        error = json.loads(proc.stderr)["error"]  # --json: the envelope
        assert error["code"] == "INDEX_UNAVAILABLE" and error["details"]["path"] == str(ledger), error
        assert "another process" in error["message"], error

        hook = subprocess.run(
            [
                sys.executable,
                "-m",
                "coffer_memory._session_end",
                "--home",
                str(tmp_home),
                "--agent",
                target.agent,
                "--session-id",
                target.session_id,
                "--cwd",
                target.project_path,
                "--settle",
                "0",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")
        (logged,) = (tmp_home / "logs" / "hook.log").read_text().splitlines()
        assert "LedgerUnavailable" in logged and "another process" in logged, logged

        from fastapi.testclient import TestClient

        from coffer_memory_fastapi import create_app

        settings = Settings.load(tmp_home, busy_timeout_ms=int(BUSY_MS))
        with MemoryService(settings=settings) as svc, TestClient(create_app(svc)) as client:
            url = f"/api/v1/agents/{target.agent}/sessions/{target.session_id}/end"
            op = poll(client, client.post(url, json={"cwd": target.project_path}).headers["Location"])
        assert op["status"] == "failed" and op["error"]["code"] == "INDEX_UNAVAILABLE", op
        assert "another process" in op["error"]["message"]
    proc = _coffer(tmp_home, "distill", target.session_id, "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["status"] == "distilled", proc.stderr


def test_a_ledger_that_cannot_be_opened_is_a_typed_error(tmp_home: Path) -> None:
    """A folder in place of ledger.db: a distillation's first look at the ledger died with a raw
    ``IsADirectoryError`` (the CLI's "unexpected"); it is ``LedgerUnavailable`` naming the file
    (``doctor`` logs it and goes on)."""
    from coffer_memory import LedgerUnavailable
    from coffer_memory._transcripts.ledger import Ledger

    (tmp_home / "ledger.db").mkdir(parents=True)
    ledger = Ledger(tmp_home / "ledger.db")
    with pytest.raises(LedgerUnavailable) as raised:
        ledger.is_done("claude-code", "s1", "0" * 64)
    assert raised.value.code == "INDEX_UNAVAILABLE" and "Is a directory" in raised.value.message
    assert ledger.check() == []


def test_a_ledger_that_is_a_link_to_nothing_makes_no_file_where_it_points(
    tmp_home: Path, tmp_path: Path
) -> None:
    """ledger.db a symbolic link to a file that is not there (a synced home, a hand-made link):
    the first look at the ledger made the link's target, outside the home, and kept every
    distillation's record there. Nothing is made through the link: ``LedgerUnavailable`` names
    the link and where it points, as a link to nothing in place of index.db does."""
    from coffer_memory import LedgerUnavailable
    from coffer_memory._transcripts.ledger import Ledger

    outside = tmp_path / "elsewhere" / "ledger.db"
    outside.parent.mkdir()
    tmp_home.mkdir(parents=True, exist_ok=True)
    (tmp_home / "ledger.db").symlink_to(outside)
    with pytest.raises(LedgerUnavailable) as raised:
        Ledger(tmp_home / "ledger.db").is_done("claude-code", "s1", "0" * 64)
    assert f"a symbolic link to {outside}" in raised.value.message, raised.value.message
    assert not outside.exists() and (tmp_home / "ledger.db").is_symlink()


def test_garbage_written_over_a_ledger_in_use_is_met_at_the_next_use(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer
) -> None:
    """Another program writes garbage over ledger.db while a service (coffer-api, coffer-mcp)
    holds it open. The service went on answering from its open connection (SQLite's cache and the
    -wal), never looking at the file again, while the file at the path stayed garbage: the next
    process to open it moved it aside and could carry no row over, so every session distilled in
    several runs lost which turns it had sent. The service's next use of the ledger sees the file
    changed and no longer an SQLite file: it carries the rows its connection still reads into a new
    ledger (the garbage kept aside), and says so in doctor."""
    write_llm_config(tmp_home, llm.url)
    first, fresh = [e for e in samples.expected if e.project_path == str(samples.project_dir)][:2]
    ledger = tmp_home / "ledger.db"
    with MemoryService(tmp_home) as svc:
        assert svc.distill_session(first.agent, first.session_id).status == "distilled"
        asked = len(llm.requests)
        ledger.write_bytes(b"garbage, not a ledger\n" * 300)  # as ``cp`` writes over it
        assert svc.distill_session(first.agent, first.session_id).status == "already_distilled"
        assert len(llm.requests) == asked
        assert svc.distill_session(fresh.agent, fresh.session_id).status == "distilled"
        (line,) = [r for r in svc.doctor().index_repairs if "ledger.db" in r]
        assert "not an SQLite file" in line and "1 row" in line, line
    (kept,) = tmp_home.glob("ledger.db.damaged-*[0-9]Z")
    assert kept.read_bytes().startswith(b"garbage, not a ledger")
    conn = apsw.Connection(str(ledger), flags=apsw.SQLITE_OPEN_READONLY)
    rows = conn.execute("SELECT session_id, status, insights FROM distilled_sessions ORDER BY session_id")
    assert sorted(rows) == sorted([(first.session_id, "done", 2), (fresh.session_id, "done", 2)])
    conn.close()


@pytest.mark.parametrize("on", ["chunks", "documents"])
def test_a_trigger_that_drops_writes_planted_under_a_running_service_is_met_by_the_next_write(
    tmp_home: Path, on: str
) -> None:
    """A ``RAISE(IGNORE)`` trigger planted while a service holds the index open, after its open
    checked the schema: it fails no statement, so the service's writes were dropped without a
    word (recall never found the fact) until ``coffer doctor`` or the next process looked. Each
    write transaction now reads ``PRAGMA schema_version`` and, when another program changed the
    schema since, checks its shape: the write is durable and pending, and the next read rebuilds
    the index and finds it."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        conn = apsw.Connection(str(tmp_home / "index.db"))
        conn.execute(f"CREATE TRIGGER planted BEFORE INSERT ON {on} BEGIN SELECT RAISE(IGNORE); END")
        conn.close()
        loom = svc.remember("The loom is oiled.", title="loom", scope="global")
        assert loom.receipt is not None and loom.receipt.index_pending
        found = {h.title for h in svc.recall("loom oiled", stores=["global"], mode="keyword").hits}
        assert found == {"loom"}
        (repair,) = svc.db.repairs()
        assert "planted" in repair


def test_an_index_another_process_holds_is_no_raw_error(tmp_home: Path) -> None:
    """index.db's write lock held by another process past the busy timeout (a long write): a
    recall that had a file to index, ``coffer reindex`` and ``coffer doctor`` died with
    "unexpected BusyError: database is locked". A recall now answers from the index as it stands
    (as when the index cannot be written), the others say ``INDEX_UNAVAILABLE`` and why; once the
    lock is let go, the next recall indexes the file."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    inbox = tmp_home / "memory" / "global" / "knowledge" / "inbox"
    (inbox / "by-hand.md").write_text("---\ntitle: by hand\n---\n\nThe kiln is oiled by hand.\n")
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_BUSY_TIMEOUT_MS": BUSY_MS}

    def coffer(*args: str) -> subprocess.CompletedProcess[str]:
        run = [sys.executable, "-m", "coffer_memory", *args]
        return subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)

    with _held(tmp_home / "index.db"):
        proc = coffer("recall", "kiln", "--store", "global", "--mode", "keyword")
        assert proc.returncode == 0 and "runs hot" in proc.stdout, proc.stdout + proc.stderr
        assert "unexpected" not in proc.stderr and "answering from it as it is" in proc.stderr
        for args in (("reindex",), ("doctor",)):
            proc = coffer(*args)
            assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
            assert "error: INDEX_UNAVAILABLE: " in proc.stderr and "another process" in proc.stderr
    proc = coffer("recall", "oiled by hand", "--store", "global", "--mode", "keyword")
    assert proc.returncode == 0 and "by hand" in proc.stdout, proc.stdout + proc.stderr

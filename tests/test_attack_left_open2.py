"""What store23 found and left open (a ledger.db whose table another program changed, a trigger
planted in index.db, empty recalls beside a repair storm), pinned: each test here failed before
its fix. Real homes, real SQLite files, a scripted model on 127.0.0.1, ``coffer`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import apsw
import pytest
from agent_samples import AgentSamples
from conftest import embedder_plugin, example_embedder
from http_scripted import ScriptedServer
from test_attack_home_entries import _coffer
from test_distill import llm as llm
from test_distill import project_store, write_llm_config
from test_distill import samples as samples

from coffer_memory import MemoryService, Settings
from coffer_memory._index import shape

# Another program's hand in ledger.db: its own table in the ledger's place, one of the ledger's
# columns gone (a table copied without it, and without the key), a view in its place, a trigger
# that refuses every claim; and a file that is no database at all.
LEDGER_TAMPER = {
    "foreign-table": "DROP TABLE distilled_sessions; "
    "CREATE TABLE distilled_sessions (id INTEGER PRIMARY KEY, note TEXT); "
    "INSERT INTO distilled_sessions (note) VALUES ('theirs')",
    "column-missing": "CREATE TABLE copied AS SELECT agent, session_id, content_sha256, status, claimed_at, "
    "distilled_at, store, insights, prompt_tokens, completion_tokens, message_count, message_digests, "
    "first_digest FROM distilled_sessions; DROP TABLE distilled_sessions; "
    "ALTER TABLE copied RENAME TO distilled_sessions",
    "view": "DROP TABLE distilled_sessions; CREATE VIEW distilled_sessions AS SELECT 1 AS agent",
    "trigger": "CREATE TRIGGER no_claims BEFORE INSERT ON distilled_sessions "
    "BEGIN SELECT raise(ABORT, 'no claims here'); END",
    "not-a-database": "",
}
# Where the rows of the ledger are still there to carry over (the others lost them to the change).
KEPT_ROWS = {"column-missing", "trigger"}


def _tamper_ledger(path: Path, how: str) -> None:
    if how == "not-a-database":
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        path.write_bytes(b"this is not an SQLite file\n" * 200)
        return
    conn = apsw.Connection(str(path))
    conn.execute(LEDGER_TAMPER[how])
    conn.close()


def _distill(home: Path, session_id: str) -> subprocess.CompletedProcess[str]:
    return _coffer(home, "distill", session_id, "--json")


@pytest.mark.parametrize("how", sorted(LEDGER_TAMPER))
def test_a_tampered_ledger_is_repaired_and_no_session_is_distilled_twice(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer, how: str
) -> None:
    """ledger.db changed by another program (its own ``distilled_sessions`` table, a column gone,
    a view or a trigger in the way, garbage bytes): ``coffer distill`` died with a raw ``SQLError``
    (the CLI's "unexpected"), as did the session-end hook and REST's distill. The ledger is repaired
    as the index is, but keeps what it can: the changed table (or the file) is kept under another
    name, the rows it still holds are carried into the new table, and a session distilled before
    is not sent to the model again nor written twice (its journal entries say it was distilled,
    whatever the ledger lost). ``coffer doctor`` lists the repair."""
    write_llm_config(tmp_home, llm.url)
    target, fresh = [e for e in samples.expected if e.project_path == str(samples.project_dir)][:2]
    store = project_store(samples)
    with MemoryService(tmp_home) as svc:
        assert svc.distill_session(target.agent, target.session_id).status == "distilled"
    asked = len(llm.requests)
    ledger = tmp_home / "ledger.db"
    _tamper_ledger(ledger, how)

    proc = _distill(tmp_home, target.session_id)
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["status"] == "already_distilled"
    assert len(llm.requests) == asked
    proc = _distill(tmp_home, fresh.session_id)  # a session never distilled: claimed and recorded
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "distilled"
    with MemoryService(tmp_home) as svc:
        (entry,) = svc.distilled_sessions(target.agent, target.session_id)
        assert entry.status == "done"
        if how in KEPT_ROWS:  # carried over: what it produced and cost is still there
            assert (entry.insights, entry.prompt_tokens) == (2, 11)
        assert [e.status for e in svc.distilled_sessions(fresh.agent, fresh.session_id)] == ["done"]
        journal = svc.journal(cwd=samples.project_dir)
        assert sum(len(day.entries) for day in journal) == 4
        assert store in {s.name for s in svc.stores()}

    proc = _coffer(tmp_home, "doctor")
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("repaired: ") and "ledger.db" in ln]
    assert "kept as" in line, line
    if how == "foreign-table":  # another program's rows are kept, in the file, under another name
        conn = apsw.Connection(str(ledger))
        (name,) = [
            str(r[0])
            for r in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'distilled_sessions_%'")
        ]
        assert name in line
        assert list(conn.execute(f'SELECT note FROM "{name}"')) == [("theirs",)]
        conn.close()
    if how == "not-a-database":
        (kept,) = tmp_home.glob("ledger.db.damaged-*[0-9]Z")
        assert kept.read_bytes().startswith(b"this is not an SQLite file")
        assert kept.name in line


@pytest.mark.parametrize("how", ["trigger", "foreign-table", "dropped"])
def test_a_ledger_changed_under_a_running_service_is_repaired_at_the_next_call(
    tmp_home: Path, samples: AgentSamples, llm: ScriptedServer, how: str
) -> None:
    """The same change made while a service (coffer-api, coffer-mcp) holds the ledger open: the
    next distillation's statement fails, the ledger's shape is checked then, repaired, and the
    call runs again and succeeds; ``doctor`` of the same service lists the repair."""
    write_llm_config(tmp_home, llm.url)
    target, fresh = [e for e in samples.expected if e.project_path == str(samples.project_dir)][:2]
    with MemoryService(tmp_home) as svc:
        assert svc.distill_session(target.agent, target.session_id).status == "distilled"
        conn = apsw.Connection(str(tmp_home / "ledger.db"))
        conn.execute("DROP TABLE distilled_sessions" if how == "dropped" else LEDGER_TAMPER[how])
        conn.close()
        assert svc.distill_session(fresh.agent, fresh.session_id).status == "distilled"
        assert [e.status for e in svc.distilled_sessions(fresh.agent, fresh.session_id)] == ["done"]
        kept = [e.insights for e in svc.distilled_sessions(target.agent, target.session_id)]
        assert kept == ([2] if how == "trigger" else [])
        (line,) = [r for r in svc.doctor().index_repairs if r.split(": ", 1)[1].startswith("ledger.db: ")]
        assert {"trigger": "no_claims", "foreign-table": "another program's", "dropped": "dropped"}[
            how
        ] in line


# Another program's hand in index.db that acts on the index's own writes: a trigger that aborts
# them, one that drops them without a word (RAISE(IGNORE)), an index that refuses a second row.
PLANTED = {
    "trigger-abort": "CREATE TRIGGER planted BEFORE INSERT ON documents BEGIN SELECT RAISE(ABORT, 'planted'); END",
    "trigger-ignore": "CREATE TRIGGER planted BEFORE INSERT ON chunks BEGIN SELECT RAISE(IGNORE); END",
    "unique-index": "CREATE UNIQUE INDEX planted ON documents (kind)",
    # Under the index's own names, in the place of its own (passed: only the names were compared).
    "own-trigger-abort": "DROP TRIGGER documents_drop_tags; CREATE TRIGGER documents_drop_tags BEFORE "
    "INSERT ON documents BEGIN SELECT RAISE(ABORT, 'planted'); END",
    "own-index-unique": "DROP INDEX idx_documents_project; "
    "CREATE UNIQUE INDEX idx_documents_project ON documents (kind)",
}
# What the repair names: the planted object.
PLANTED_NAME = {"own-trigger-abort": "documents_drop_tags", "own-index-unique": "idx_documents_project"}


def _plant(home: Path, how: str) -> None:
    conn = apsw.Connection(str(home / "index.db"))
    conn.execute(PLANTED[how])
    conn.close()


def _by_hand(home: Path) -> None:
    inbox = home / "memory" / "global" / "knowledge" / "inbox"
    inbox.mkdir(parents=True, exist_ok=True)
    (inbox / "by-hand.md").write_text("---\ntitle: by hand\n---\n\nThe loom is oiled by hand.\n")


@pytest.mark.parametrize("how", sorted(PLANTED))
def test_a_trigger_or_index_planted_in_the_index_is_damage(tmp_home: Path, how: str) -> None:
    """A trigger (or an index) another program planted in index.db: every write of the index
    failed with a raw ``ConstraintError`` (the CLI's "unexpected", MCP's INTERNAL), or, for a
    trigger that answers RAISE(IGNORE), was dropped without a word and recall never found the
    file. The index makes no object but its own: another one is damage, moved aside and rebuilt
    from the files, and doctor lists it."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    _plant(tmp_home, how)
    _by_hand(tmp_home)
    proc = _coffer(tmp_home, "recall", "loom oiled", "--store", "global", "--mode", "keyword")
    assert proc.returncode == 0, proc.stderr
    assert "by hand" in proc.stdout and "unexpected" not in proc.stderr
    proc = _coffer(tmp_home, "remember", "The kettle whistles.", "--store", "global", "--title", "kettle")
    assert proc.returncode == 0 and "index_pending" not in proc.stdout, proc.stdout + proc.stderr
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("repaired: ")]
    assert PLANTED_NAME.get(how, "planted") in line and "moved to index.db.corrupt-" in line


@pytest.mark.parametrize("how", sorted(PLANTED))
def test_a_trigger_planted_under_a_running_service_is_met_as_damage(tmp_home: Path, how: str) -> None:
    """The same planted while a service holds the index open: the write that meets it fails, the
    schema is checked then (as for a table another program changed), and the next read moves the
    file aside and rebuilds it; the recall answers with the fact (a trigger that drops writes
    without a word fails none: ``coffer doctor`` finds it, as the next process's open does)."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        _plant(tmp_home, how)
        svc.remember("The loom is oiled.", title="loom", scope="global")
        _by_hand(tmp_home)
        if how == "trigger-ignore":  # no write fails: only a look at the schema finds it
            assert "planted" in svc.doctor().index_repairs[0]
        found = {h.title for h in svc.recall("loom oiled", stores=["global"], mode="keyword").hits}
        assert found == {"loom", "by hand"}
        (repair,) = svc.doctor().index_repairs
        assert PLANTED_NAME.get(how, "planted") in repair


def test_the_index_knows_every_trigger_and_index_its_migrations_make(tmp_home: Path) -> None:
    """``shape.TRIGGERS`` and ``shape.INDEXES`` are the migrations' own, names and SQL: a migration
    that made another without naming it there would have its own index moved aside at every open."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        rows = svc.db.rows("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'index')")
    made = {(t, n): shape.squeezed(sql) for t, n, sql in rows if not n.startswith("sqlite_autoindex_")}
    assert {n: sql for (t, n), sql in made.items() if t == "trigger"} == shape.TRIGGERS
    assert {n: sql for (t, n), sql in made.items() if t == "index"} == shape.INDEXES


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_planted_trigger_is_repaired_over_mcp_stdio(tmp_home: Path) -> None:
    """coffer-mcp over stdio, on an index with a trigger another program planted: the tools
    answer from the rebuilt index (the trigger failed the recall with INTERNAL)."""
    from mcp import Client, StdioServerParameters

    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    _plant(tmp_home, "trigger-abort")
    _by_hand(tmp_home)
    env = {**os.environ, "COFFER_HOME": str(tmp_home)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "coffer_memory_mcp.cli"], env=env)
    async with Client(params) as client:
        recall = await client.call_tool("coffer__recall", {"query": "loom oiled", "cwd": str(tmp_home)})
    assert not recall.is_error, recall
    assert "by hand" in json.dumps(recall.structured_content)


def test_a_trigger_planted_under_the_rest_face_is_repaired(client: Any, tmp_home: Path) -> None:
    """coffer-api's service, a trigger planted under it: the write is durable (index pending), and
    the recall after it rebuilds the index and finds the fact, never a 500."""
    api = "/api/v1/memory_stores"
    assert client.post(f"{api}/global/facts", json={"text": "The kiln runs hot."}).status_code == 201
    _plant(tmp_home, "trigger-abort")
    written = client.post(f"{api}/global/facts", json={"text": "The loom is oiled."})
    assert written.status_code == 201, written.text
    found = client.get(f"{api}/recall", params={"query": "loom oiled", "store": "global", "mode": "keyword"})
    assert found.status_code == 200, found.text
    assert [h["text"] for h in found.json()["hits"]] == ["The loom is oiled."]


# Another process's repair of the index, once: the file (with its -wal and -shm) moved aside and
# a new, empty one made, as tests/_index_race.py's repair role does in a loop.
REPAIR_ONCE = (
    "import sys, apsw; from pathlib import Path; from coffer_memory._index.db import IndexDB; "
    "home = Path(sys.argv[1]); db = IndexDB(home / 'index.db', home=home); "
    "db.note_damage(apsw.CorruptError('moved aside by the test')); db.repair(); db.close()"
)


class _RepairsOnce(example_embedder()):  # type: ignore[misc]
    """The docs' example embedder, which, armed, has another process repair the index while it
    embeds a text saying "by hand": between a recall's reconcile and its read."""

    def __init__(self, home: Path) -> None:
        super().__init__(64)
        self.home = home
        self.armed = False

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        if self.armed and any("by hand" in t for t in texts):
            self.armed = False
            env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
            subprocess.run(
                [sys.executable, "-c", REPAIR_ONCE, str(self.home)], check=True, env=env, timeout=120
            )
        return super().embed_batch(texts)  # type: ignore[no-any-return]


def test_a_recall_whose_index_another_process_replaced_before_its_read_answers_from_the_files(
    tmp_home: Path,
) -> None:
    """Another process's repair that replaced index.db between a recall's reconcile and its read:
    the read opened the new file, empty until a reconcile fills it, and the recall answered
    nothing (store23's race runs saw it while one process repaired again and again). The recall
    sees that it read another file than the one it brought up to date, and does it again."""
    pytest.importorskip("sqlite_vec")
    embedder = _RepairsOnce(tmp_home)
    settings = Settings.load(
        tmp_home,
        embedding={"provider": "repairs-once"},
        memory={"retrieval_modes": ["keyword", "vector"], "default_mode": "keyword"},
    )
    with embedder_plugin("repairs-once", embedder), MemoryService(settings=settings) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        assert [h.title for h in svc.recall("kiln", stores=["global"]).hits] == ["kiln"]
        _by_hand(tmp_home)  # indexed by the next read, its vector embedded after the reconcile
        embedder.armed = True
        found = [h.title for h in svc.recall("loom oiled", stores=["global"]).hits]
        assert not embedder.armed  # the other process did repair the index in between
        assert found == ["by hand"]


def test_doctor_looks_at_the_ledger_without_failing_on_one_it_cannot_open(tmp_home: Path) -> None:
    """``coffer doctor`` checks the ledger's shape now; a folder in place of ledger.db (or one it
    may not open) is no reason for doctor itself to fail, nor is a home that never distilled given
    a ledger.db by it."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0 and not (tmp_home / "ledger.db").exists(), proc.stdout + proc.stderr
    (tmp_home / "ledger.db").mkdir()
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0 and "unexpected" not in proc.stderr, proc.stdout + proc.stderr

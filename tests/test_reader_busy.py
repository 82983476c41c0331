"""Reader connections run without SQLite's connection mutex (``SQLITE_OPEN_NOMUTEX``), so
nothing in SQLite or apsw keeps ``close`` from freeing one under another thread's statement:
``IndexDB.busy``, held across every statement a reader steps and across each read transaction,
is what ``close`` asks. Real threads, real homes; the stress runs in a child process, so a
connection freed under a running statement shows as the child's death, not the test run's."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import apsw

from coffer_memory import MemoryService, Settings
from coffer_memory._index.db import IndexDB
from coffer_memory._retrieval import KnowledgeRetrieval

_STRESS = r"""
import json, subprocess, sys, threading, time
from collections import Counter
from pathlib import Path

import apsw

from coffer_memory import MemoryService, Settings

home, repo, seconds = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
words = ["kiln", "glaze", "clay", "wheel", "slip", "bisque", "oxide", "cone", "wedge", "trim"]
svc = MemoryService(settings=Settings.load(home))
for i in range(120):
    a, b, c = words[i % 10], words[(i * 3) % 10], words[(i * 7) % 10]
    svc.remember(f"Note {i}: the {a} and the {b} before the {c}.", title=f"n{i}", scope="global",
                 tags=["even" if i % 2 == 0 else "odd"])
    if i % 3 == 0:
        svc.remember(f"Project {i}: {c} then {a}.", title=f"p{i}", scope="project", cwd=repo,
                     tags=["even"])
stop = time.monotonic() + seconds
cap = stop + 60  # on a loaded machine the window runs on until enough happened in it
seen = Counter()
guard = threading.Lock()
done = threading.Event()

def work(n):
    j = 0
    while not done.is_set():
        j += 1
        query = f"{words[(n + j) % 10]} {words[(n * 5 + j) % 10]}"
        try:
            if j % 3 == 0:  # a filter: a query per store, the second on the worker's reader
                svc.recall(query, cwd=repo, tags=["even"], mode="keyword")
            elif j % 3 == 1:
                svc.recall(query, cwd=repo, mode="keyword")
            else:
                svc.list_facts(store="global", limit=5)
            kind = "ok"
        except (apsw.ConnectionClosedError, apsw.CursorClosedError) as exc:
            kind = type(exc).__name__  # a connection closed between two reads: not a crash
        with guard:
            seen[kind] += 1

threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
for t in threads:
    t.start()
closes = 0
while time.monotonic() < cap and (time.monotonic() < stop or closes <= 150 or seen["ok"] <= 60):
    svc.index.close()  # not final: the next read opens the index again
    closes += 1
    time.sleep(0.002)
done.set()
for t in threads:
    t.join()
svc.close()
print(json.dumps({"seen": seen, "closes": closes}))
"""


def test_readers_closed_over_and_over_under_running_recalls_never_crash(tmp_path: Path) -> None:
    """Three threads recall (one MATCH for both stores, and filtered: a query per store, the
    second on the fan-out worker's reader) and list while the main thread closes the index every
    2 ms for 4 s (longer when a loaded machine has not done enough in that time). Without the busy mark the child dies (a statement stepping freed memory) or
    SQLite reports misuse; with it, each call answers, or at most meets a connection closed
    between its reads (never inside one), and the child exits cleanly."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = tmp_path / "home"
    done = subprocess.run(
        [sys.executable, "-c", _STRESS, str(home), str(repo), "4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["closes"] > 100
    assert set(report["seen"]) <= {"ok", "ConnectionClosedError", "CursorClosedError"}, report
    assert report["seen"]["ok"] > 50, report


def test_a_reader_inside_a_read_transaction_is_left_open_by_close(tmp_path: Path) -> None:
    """``close`` from another thread meets a reader inside one recall's read transaction, its
    MATCH prepared and about to step (held still by the statement trace): it stays open, the
    recall answers in full, and the next ``close`` closes it. (Closed there, the MATCH would
    step a freed connection: a reader has no SQLite mutex for apsw to find it busy by.)"""
    svc = MemoryService(settings=Settings.load(tmp_path / "home"))
    svc.remember("the kiln is fired before the glaze", scope="global")
    between, release = threading.Event(), threading.Event()
    found: list[int] = []
    readers: list[KnowledgeRetrieval] = []

    def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
        if "MATCH" in sql and not between.is_set():  # the read transaction began before it
            between.set()
            release.wait(30)
        return True

    def recall() -> None:
        svc.recall("kiln", stores=["global"])  # this thread's reader opened, the store checked
        reader = svc.retrieval
        readers.append(reader)
        reader.db.conn.exec_trace = trace
        try:
            found.append(len(svc.recall("kiln", stores=["global"]).hits))
        finally:
            reader.db.conn.exec_trace = None

    one = threading.Thread(target=recall)
    one.start()
    try:
        assert between.wait(30)
        reader = readers[0]
        svc.index.close()
        assert not reader.db.closed
    finally:
        release.set()
        one.join(30)
    assert found == [1]
    svc.close()
    assert reader.db.closed


def test_close_idle_closes_a_reader_only_when_no_other_thread_holds_it(tmp_path: Path) -> None:
    """``IndexDB.close_idle``: False while another thread holds ``busy`` (the connection open and
    usable after), True once it let go."""
    db = IndexDB(tmp_path / "index.db", reader=True)
    assert db.conn.open_flags & apsw.SQLITE_OPEN_NOMUTEX
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.busy:
            held.set()
            release.wait(30)

    other = threading.Thread(target=hold)
    other.start()
    held.wait(30)
    try:
        assert db.close_idle() is False
        assert not db.closed
    finally:
        release.set()
        other.join(30)
    assert db.rows("SELECT 1") == [(1,)]
    assert db.close_idle() is True
    assert db.closed
    writer = IndexDB(tmp_path / "index.db")
    assert not writer.conn.open_flags & apsw.SQLITE_OPEN_NOMUTEX
    writer.close()

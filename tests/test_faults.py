"""Fault injection: odd files, a damaged or moved index, edits that hide, races on close, dead writers.

Everything is real: temp homes, files written with os calls (bytes names, FIFOs, huge files),
SQLite files damaged on disk, homes moved with ``os.rename``/``shutil.copytree``, ``coffer``
run as a subprocess.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import failing_backend
import pytest

from coffer_memory import MemoryService
from coffer_memory._config import Settings
from coffer_memory._index.db import MIGRATIONS, IndexDB
from coffer_memory._store.files import FactParseError, parse_fact, parse_time
from coffer_memory._store.scan import stale_temp_files
from coffer_memory.plugins.builtin.grep import PythonGrepBackend, RipgrepBackend, find_ripgrep


def _fact(title: str, body: str, created: str | None = "2026-01-02T03:04:05.000+00:00") -> bytes:
    head = f"---\ntitle: {title}\n" + (f"created_at: {created}\n" if created is not None else "")
    return (head + "---\n\n" + body + "\n").encode()


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _ids(svc: MemoryService, query: str, **kw: object) -> set[str]:
    res = svc.recall(query, stores=["global"], **kw)  # type: ignore[arg-type]
    return {h.title for h in res.hits}


def coffer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``coffer`` in its own interpreter: what reaches stderr is what a user sees, log lines included."""
    env = {**os.environ, "COFFER_HOME": str(home)}
    cmd = [sys.executable, "-m", "coffer_memory._cli", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)


@pytest.fixture
def home_with_facts(tmp_home: Path) -> Path:
    """A home whose global store holds two facts (and their index)."""
    with MemoryService(tmp_home) as svc:
        svc.remember("Deploy with make release", title="deploy", store="global")
        svc.remember("Rotate the staging keys monthly", title="rotate", store="global")
    return tmp_home


# -- 5. one odd file never takes a store down --------------------------------------------------------
def test_a_file_name_that_is_not_utf8_is_skipped_and_listed(home_with_facts: Path, repo: Path) -> None:
    with MemoryService(home_with_facts) as svc:
        inbox = svc.paths("global").inbox
        fd = os.open(os.fsencode(inbox) + b"/caf\xe9-deploy.md", os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, _fact("odd name", "deploy notes in an odd name"))
        os.close(fd)
        assert _ids(svc, "deploy") == {"deploy"}
        # The global store takes part in recall from every project.
        assert "deploy" in {h.title for h in svc.recall("deploy", cwd=repo).hits}
        report = svc.doctor()
        (broken,) = report.broken
        assert "UTF-8" in broken.error
        assert "caf" in str(broken.path)
        str(broken.path).encode("utf-8")  # printable: the undecodable byte is escaped
    out = coffer(home_with_facts, "doctor")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "not valid UTF-8" in out.stdout


@pytest.mark.parametrize(
    "created",
    [
        "1960-05-01T00:00:00+00:00",
        "1969-12-31",
        "0000-00-00",
        "2024",
        "2024-01-02T03:04:05",
        "'10000-01-01T00:00:00+00:00'",
        "9999-12-31T23:00:00-05:00",
        "[1, 2]",
        "{a: 1}",
        "true",
    ],
)
def test_odd_created_at_values_do_not_take_the_store_down(home_with_facts: Path, created: str) -> None:
    with MemoryService(home_with_facts) as svc:
        path = _write(
            svc.paths("global").inbox / "odd-date.md", _fact("odd date", "deploy on odd dates", created)
        )
        assert _ids(svc, "deploy") == {"deploy", "odd date"}
        page = svc.list_facts(store="global")
        odd = next(r for r in page.items if r.path == path)
        assert 1970 <= odd.fact.created_at.year <= 9999
        assert svc.get_fact(odd.fact.id, store="global").fact.title == "odd date"
        assert svc.doctor().ok


def test_parse_time_accepts_only_representable_times() -> None:
    assert parse_time("2026-01-02T03:04:05Z") is not None
    assert parse_time("2026-01-02T03:04:05").tzinfo is not None  # type: ignore[union-attr]
    for value in ("1960-01-01", "9999-12-31T23:00:00-05:00", "0000-00-00", 2024, None, [], "soon"):
        assert parse_time(value) is None, value


def _unblock_fifo(path: Path) -> None:
    """Open the FIFO for writing once, so a reader stuck in open() returns (the test then fails)."""
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def _finishes(fn: Callable[[], object], fifo: Path, seconds: float = 20.0) -> object:
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        _unblock_fifo(fifo)
        worker.join(5)
        pytest.fail("blocked on a FIFO")
    assert out, "the call raised"
    return out[0]


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_a_fifo_named_md_is_never_opened(home_with_facts: Path, backend: str) -> None:
    if backend == "ripgrep" and find_ripgrep() is None:
        pytest.skip("no rg")
    (home_with_facts / "config.toml").write_text(f'grep_backend = "{backend}"\n')
    with MemoryService(home_with_facts) as svc:
        knowledge = svc.paths("global").knowledge
        fifo = knowledge / "pipe.md"
        os.mkfifo(fifo)
        res = _finishes(lambda: svc.recall("deploy", stores=["global"], mode="grep"), fifo)
        assert {h.title for h in res.hits} == {"deploy"}  # type: ignore[attr-defined]
        report = _finishes(svc.doctor, fifo)
        assert [b.error for b in report.broken] == ["not a regular file (a FIFO)"]  # type: ignore[attr-defined]
        grep = PythonGrepBackend() if backend == "python" else RipgrepBackend()
        lines = _finishes(lambda: grep.search([knowledge], ["deploy"], max_lines=10), fifo)
        assert {m.path.name for m in lines} == {"deploy.md"}  # type: ignore[attr-defined]


def test_a_file_over_the_size_cap_is_skipped_warned_once_and_listed(
    home_with_facts: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (home_with_facts / "config.toml").write_text("[memory]\nmax_file_bytes = 4096\n")
    with MemoryService(home_with_facts) as svc:
        big = _write(svc.paths("global").knowledge / "huge.md", _fact("huge", "deploy " * 2000))
        with caplog.at_level(logging.WARNING, logger="coffer_memory"):
            assert _ids(svc, "deploy") == {"deploy"}
            assert _ids(svc, "deploy") == {"deploy"}
            svc.reindex("global")
        warned = [r for r in caplog.records if "huge.md" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in warned]
        (broken,) = svc.doctor().broken
        assert broken.path == big and "max_file_bytes" in broken.error
        big.write_bytes(_fact("huge", "deploy small now"))
        assert _ids(svc, "deploy") == {"deploy", "huge"}
    assert Settings.load(home_with_facts).memory.max_file_bytes == 4096
    assert Settings().memory.max_file_bytes >= 1 << 20


def test_a_yaml_alias_bomb_is_refused_before_it_expands(home_with_facts: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 6)]
    bomb = ("---\ntitle: bomb\n" + "\n".join(levels) + "\n---\n\ndeploy bomb\n").encode()
    with pytest.raises(FactParseError, match="alias"):
        parse_fact(bomb, store="global", relpath="knowledge/bomb.md", mtime=0.0)
    deep = ("---\ntitle: deep\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n\nbody\n").encode()
    with pytest.raises(FactParseError):
        parse_fact(deep, store="global", relpath="knowledge/deep.md", mtime=0.0)
    with MemoryService(home_with_facts) as svc:
        _write(svc.paths("global").knowledge / "bomb.md", bomb)
        assert _ids(svc, "deploy") == {"deploy"}
        (broken,) = svc.doctor().broken
        assert "alias" in broken.error


# -- 6. a damaged, foreign or moved index ------------------------------------------------------------
def _garbage(db: Path) -> None:
    db.write_bytes(os.urandom(64 * 1024))


def _truncated(db: Path) -> None:
    with apsw.Connection(str(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = db.stat().st_size
    with open(db, "r+b") as handle:
        handle.truncate(size // 3)


def _not_sqlite(db: Path) -> None:
    db.write_text("this is a text file, not a database\n" * 200)


def _foreign(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with apsw.Connection(str(db)) as conn:
        conn.execute(
            "CREATE TABLE documents (name TEXT); CREATE TABLE other (x); INSERT INTO other VALUES (1)"
        )


def _future(db: Path) -> None:
    with apsw.Connection(str(db)) as conn:
        conn.execute(f"PRAGMA user_version={len(MIGRATIONS) + 40}")


def _wrecked_pages(db: Path) -> None:
    with apsw.Connection(str(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    for start in range(page, len(data), page):  # every page but the first (the schema's root)
        data[start : start + page] = os.urandom(page)
    db.write_bytes(bytes(data))


DAMAGE = {
    "garbage": _garbage,
    "truncated": _truncated,
    "not-sqlite": _not_sqlite,
    "foreign-sqlite": _foreign,
    "future-schema": _future,
    "wrecked-pages": _wrecked_pages,
}


@pytest.fixture
def bigger_home(tmp_home: Path) -> Path:
    """A home with enough facts that the index spans many pages."""
    with MemoryService(tmp_home) as svc:
        for n in range(60):
            svc.remember(f"note {n}: deploy step {n} " + "filler words " * 40, title=f"n{n}", store="global")
        svc.remember("Deploy with make release", title="deploy", store="global")
    return tmp_home


FIRST: dict[str, Callable[[MemoryService], object]] = {
    "recall": lambda svc: svc.recall("deploy", stores=["global"]),
    "reindex-rebuild": lambda svc: svc.reindex(rebuild=True),
    "doctor": lambda svc: svc.doctor(),
    "list": lambda svc: svc.list_facts(store="global"),
}


@pytest.mark.parametrize("first", sorted(FIRST))
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_index_is_moved_aside_and_rebuilt(
    bigger_home: Path, damage: str, first: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = bigger_home / "index.db"
    DAMAGE[damage](db)
    with caplog.at_level(logging.WARNING, logger="coffer_memory"), MemoryService(bigger_home) as svc:
        FIRST[first](svc)
        assert "deploy" in _ids(svc, "make release")
        assert len(svc.list_facts(store="global", limit=100).items) == 61
        report = svc.doctor()
        assert report.ok, report
        (repair,) = report.index_repairs
        assert "moved to index.db.corrupt-" in repair
        (aside,) = list(bigger_home.glob("index.db.corrupt-*"))
        assert aside.name in repair
        svc.reindex(rebuild=True)
        assert "deploy" in _ids(svc, "make release")
    lines = [r.getMessage() for r in caplog.records if "corrupt-" in r.getMessage()]
    assert len(lines) == 1 and "rebuilding from the files" in lines[0]


def test_damage_found_while_in_use_is_repaired(bigger_home: Path) -> None:
    with MemoryService(bigger_home) as svc:
        assert "deploy" in _ids(svc, "make release")
        _wrecked_pages(bigger_home / "index.db")  # under a service that has it open
        assert "deploy" in _ids(svc, "make release")
        assert svc.doctor().index_repairs


def test_at_most_a_few_damaged_copies_are_kept(home_with_facts: Path) -> None:
    db = home_with_facts / "index.db"
    for _ in range(5):
        _garbage(db)
        IndexDB(db).close()
    assert 1 <= len(list(home_with_facts.glob("index.db.corrupt-*"))) <= 3


def test_cli_recall_against_a_corrupt_index_rebuilds_without_a_traceback(home_with_facts: Path) -> None:
    _garbage(home_with_facts / "index.db")
    out = coffer(home_with_facts, "recall", "make release", "--store", "global")
    assert out.returncode == 0, out.stderr
    assert "Deploy with make release" in out.stdout
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "rebuilding" in out.stderr
    out = coffer(home_with_facts, "doctor")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "index.db.corrupt-" in out.stdout


def test_cli_prints_one_line_and_the_log_path_on_an_unexpected_error(
    home_with_facts: Path, tmp_path: Path
) -> None:
    # A plugin's own bug (a shared index backend whose search raises a plain RuntimeError, a real
    # distribution chosen in config.toml) fails the recall inside the core. (A folder in place of
    # index.db did, until it became INDEX_UNAVAILABLE; a word index made a plain table did, until
    # the schema's shape was checked on open; a planted trigger, a CHECK in a table's SQL, a blob
    # where a text belongs, bytes that are not UTF-8 and a chunk id that is none did, until each
    # became damage: test_attack_left_open..4, test_header_values, test_index_values28.)
    env = failing_backend.install(tmp_path / "site", home_with_facts)
    cmd = [
        sys.executable,
        "-m",
        "coffer_memory._cli",
        "recall",
        "deploy",
        "--store",
        "global",
        "--mode",
        "keyword",
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "unexpected RuntimeError" in line
    log_path = Path(line.rsplit("see ", 1)[1].rstrip(")"))
    assert "Traceback" in log_path.read_text()


def _check_moved(new: Path) -> None:
    with MemoryService(new) as svc:
        hits = svc.recall("make release", stores=["global"]).hits
        assert [h.title for h in hits][:1] == ["deploy"]
        assert hits[0].path is not None and hits[0].path.is_relative_to(new)
        (report,) = svc.reindex("global")
        assert report.added == 0 and report.removed == 0
        svc.remember("After the move", title="moved", store="global")
        assert svc.doctor().ok
        rows = svc.db.rows("SELECT path FROM documents")
        assert rows and all(not Path(r[0]).is_absolute() for r in rows)


def test_a_moved_home_just_works(home_with_facts: Path, tmp_path: Path) -> None:
    new = tmp_path / "elsewhere" / "home"
    new.parent.mkdir()
    os.rename(home_with_facts, new)
    _check_moved(new)


def test_a_copied_home_just_works(home_with_facts: Path, tmp_path: Path) -> None:
    new = tmp_path / "copy"
    shutil.copytree(home_with_facts, new)
    shutil.rmtree(home_with_facts)
    _check_moved(new)


def test_the_migration_rewrites_absolute_paths_without_reindexing(
    home_with_facts: Path, tmp_path: Path
) -> None:
    db = home_with_facts / "index.db"
    with apsw.Connection(str(db)) as conn:
        before = {r[0]: r[1] for r in conn.execute("SELECT id, content_sha256 FROM documents")}
    _downgrade_to_absolute_paths(db, home_with_facts)
    new = tmp_path / "moved"
    os.rename(home_with_facts, new)
    with MemoryService(new) as svc:
        rows = svc.db.rows("SELECT id, path, content_sha256 FROM documents")
        assert {r[0]: r[2] for r in rows} == before
        assert all(r[1].startswith("memory/global/knowledge/") for r in rows)
        (report,) = svc.reindex("global")
        assert (report.added, report.removed, report.updated) == (0, 0, 0)


def _downgrade_to_absolute_paths(db: Path, home: Path) -> None:
    """Turn the index back into what schema 4 wrote: absolute paths, no ctime/inode columns, no
    session column (migration 8's: left in, its columns came before the ones migration 5 adds
    again, and the table's SQL was not the one the migrations make: damage, rebuilt)."""
    with apsw.Connection(str(db)) as conn:
        conn.execute(f"UPDATE documents SET path = '{home}/' || path")
        conn.execute(f"UPDATE broken_files SET path = '{home}/' || path")
        conn.execute("DELETE FROM kv")
        conn.execute("DROP INDEX idx_documents_session")
        conn.execute("ALTER TABLE documents DROP COLUMN origin_session")
        for col in ("file_ctime_ns", "file_ino"):
            conn.execute(f"ALTER TABLE documents DROP COLUMN {col}")
            conn.execute(f"ALTER TABLE broken_files DROP COLUMN {col}")
        conn.execute("PRAGMA user_version=4")


# -- 8. an edit that keeps size and mtime -----------------------------------------------------------
def _sneaky_edit(path: Path, old: str, new: str, *, replace: bool) -> None:
    st = path.stat()
    data = path.read_bytes().replace(old.encode(), new.encode())
    assert len(data) == st.st_size
    if replace:  # rsync -t: a new file renamed over the old one
        tmp = path.with_name(".sneaky")
        tmp.write_bytes(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    else:  # cp -p / touch -r: rewritten in place, mtime put back
        path.write_bytes(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("large", [False, True])
def test_an_edit_keeping_size_and_mtime_is_seen(tmp_home: Path, replace: bool, large: bool) -> None:
    tmp_home.mkdir()
    if large:  # stores above the small-store limit see in-place edits on the full scan: reindex
        (tmp_home / "config.toml").write_text(
            "reconcile_full_scan_max_files = 0\nreconcile_full_scan_seconds = 3600\n"
        )
    with MemoryService(tmp_home) as svc:
        fact = svc.remember("Deploy with make release", title="deploy", store="global").path
        assert _ids(svc, "release") == {"deploy"}
    _sneaky_edit(fact, "release", "publish", replace=replace)
    with MemoryService(tmp_home) as svc:
        if large:
            svc.reindex("global")
        assert _ids(svc, "publish") == {"deploy"}
        assert _ids(svc, "release") == set()


# -- 10. close racing a background scan; temp files of dead writers ---------------------------------
def _scan_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("coffer-scan-")]


def test_close_while_a_background_scan_waits_logs_nothing(
    tmp_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_home.mkdir()
    (tmp_home / "config.toml").write_text(
        "reconcile_full_scan_max_files = 0\nreconcile_full_scan_seconds = 0\n"
        "reconcile_watch_full_scan_seconds = 0\n"  # due at once where the inotify feed vouches too
    )
    svc = MemoryService(tmp_home)
    svc.remember("Deploy with make release", title="deploy", store="global")
    svc.recall("deploy", stores=["global"])  # records the store's state
    with caplog.at_level(logging.DEBUG, logger="coffer_memory"):
        with svc.index.lock:  # the scan starts while this thread still holds the service
            svc.recall("deploy", stores=["global"])
            threads = _scan_threads()
            assert threads
            svc.close()
        for thread in threads:
            thread.join(30)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture
def dead_pid() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    yield proc.pid


def test_temp_files_of_dead_writers_are_cleaned_in_every_lane(svc: MemoryService, dead_pid: int) -> None:
    svc.remember("Deploy with make release", title="deploy", store="global")
    sp = svc.paths("global")
    old = time.time() - 600
    junk = []
    for folder in (sp.root / "rules", sp.root / "handoff", sp.root / "superseded", sp.root, sp.inbox):
        folder.mkdir(parents=True, exist_ok=True)
        path = _write(folder / ".tmp-abc123.part", b"half")
        os.utime(path, (old, old))
        junk.append(path)
    dead = _write(sp.root / "rules" / f".tmp-{dead_pid}-x1.part", b"half")
    live = _write(sp.root / "rules" / f".tmp-{os.getpid()}-x2.part", b"half")
    fresh = _write(sp.root / "handoff" / ".tmp-fresh.part", b"half")
    assert set(stale_temp_files((sp.root,))) == {*junk, dead}
    svc.reindex("global")
    assert not any(p.exists() for p in [*junk, dead])
    assert live.exists() and fresh.exists()


def test_a_fresh_index_migrated_by_another_process_mid_check_is_not_taken_for_damage(tmp_path: Path) -> None:
    """Opening an index reads its version, application id and tables to decide whether it is one.
    Another process may commit the migrations between those reads: the version read before its
    commit (0) with the tables read after looked like "an SQLite file with tables that are not an
    index", and the new index was moved aside under the process that had just created it (whose
    writes then went to the moved file: a concurrent-writers run lost one writer's 30 rows).

    SQLite's own statement trace (``apsw.connection_hooks``) starts the other process at exactly
    that point: between the version and the application id reads of this process's check."""
    path = tmp_path / "index.db"
    script = (
        "import sys\nfrom pathlib import Path\nfrom coffer_memory._index.db import IndexDB\n"
        "IndexDB(Path(sys.argv[1]), busy_timeout_ms=300).close()\n"
    )
    other: list[int] = []

    def between_the_reads(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
        if "application_id" in sql and not other:
            run = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, timeout=60)
            other.append(run.returncode)
        return True

    def hook(conn: apsw.Connection) -> None:
        conn.exec_trace = between_the_reads

    apsw.connection_hooks.append(hook)
    try:
        db = IndexDB(path)
    finally:
        apsw.connection_hooks.remove(hook)
    try:
        assert other, "the other process never ran"
        assert list(tmp_path.glob("index.db.corrupt-*")) == []
        assert db.repairs() == []
        assert int(db.scalar("PRAGMA user_version")) == len(MIGRATIONS)
    finally:
        db.close()


def test_processes_opening_a_fresh_index_together_all_open_it(tmp_path: Path) -> None:
    """Four processes open one new index at the same moment, five times: turning the new file to
    WAL needs it alone and SQLite answers BUSY at once while another holds it, so some crashed
    with "database is locked" before the open retried within the busy timeout."""
    script = (
        "import sys, time\nfrom pathlib import Path\nfrom coffer_memory._index.db import IndexDB\n"
        "start = Path(sys.argv[2])\nprint('ready', flush=True)\n"
        "while not start.exists():\n    time.sleep(0.0005)\n"
        "IndexDB(Path(sys.argv[1])).close()\n"
    )
    for round_ in range(5):
        folder = tmp_path / f"round-{round_}"
        folder.mkdir()
        start = folder / "start"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, str(folder / "index.db"), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        start.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        assert list(folder.glob("index.db.corrupt-*")) == []

"""What audit22's sweep found when an entry of a home is not what coffer made (the index file
deleted, moved or a folder; a file where the lock folder or a store folder should be), pinned:
each test here failed before its fix. Real homes, real files, ``coffer`` in a subprocess.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from coffer_memory import IndexUnavailable, MemoryService, StorageNotWritable

ROOT = Path(__file__).resolve().parents[1]


def _titles(svc: MemoryService, query: str) -> list[str]:
    return [h.title for h in svc.recall(query, stores=["global"], mode="keyword").hits]


def _coffer(
    home: Path, *args: str, timeout: float = 120, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COFFER_HOME": str(home)}
    run = [sys.executable, "-m", "coffer_memory", *args]
    return subprocess.run(run, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def test_an_index_deleted_under_a_running_service_is_rebuilt_not_left_behind(tmp_home: Path) -> None:
    """``rm index.db*`` under a running service (the docs' "delete index.db and the next read
    rebuilds it", with coffer-mcp or coffer-api running): the service went on writing into the
    deleted file through the connection it held, while its readers opened the new, empty file at
    the path. Every recall answered nothing, even for facts remembered after the delete, until the
    process restarted. A connection whose file is no longer the one at the path now reopens."""
    index = tmp_home / "index.db"
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        assert _titles(svc, "kiln") == ["kiln"]
        for suffix in ("", "-wal", "-shm"):
            Path(f"{index}{suffix}").unlink(missing_ok=True)
        assert _titles(svc, "kiln") == ["kiln"]
        loom = svc.remember("The loom is oiled.", title="loom", scope="global")
        assert loom.receipt is not None and loom.receipt.index_pending is False
        assert _titles(svc, "loom") == ["loom"]
        assert svc.get_fact(loom.fact.id, store="global").fact.title == "loom"
    assert index.exists()
    with MemoryService(tmp_home) as later:
        assert _titles(later, "kiln") == ["kiln"]
        assert _titles(later, "loom") == ["loom"]


def test_an_index_another_process_moved_aside_is_left_by_a_running_service(tmp_home: Path) -> None:
    """Another process moving the index aside (its repair of damage, or a user's ``mv``) left a
    running service writing into the moved file: the facts it indexed after that were in
    ``index.db.corrupt-*`` and not in the index every other process read."""
    index = tmp_home / "index.db"
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        assert _titles(svc, "kiln") == ["kiln"]
        for suffix in ("", "-wal", "-shm"):  # as a repair moves them
            os.replace(f"{index}{suffix}", f"{index}.moved{suffix}")
        proc = _coffer(tmp_home, "recall", "kiln", "--store", "global")  # another process builds a new one
        assert proc.returncode == 0, proc.stderr
        svc.remember("The loom is oiled.", title="loom", scope="global")
        assert _titles(svc, "loom") == ["loom"]
    # The index at the path holds the fact the service indexed (read with SQLite alone: a service
    # would reconcile from the files first); the moved file does not.
    for name, titles in (("index.db", [("loom",)]), ("index.db.moved", [])):
        conn = apsw.Connection(str(tmp_home / name))
        assert list(conn.execute("SELECT title FROM documents WHERE title = 'loom'")) == titles
        conn.close()


@pytest.mark.parametrize("entry", ["index.db", "index.db-wal"])
def test_a_folder_in_place_of_the_index_is_a_typed_error(tmp_home: Path, entry: str) -> None:
    """A folder named ``index.db`` (or ``index.db-wal``) made every read and ``coffer doctor`` die
    with ``error: unexpected CantOpenError: unable to open database file``. It is
    INDEX_UNAVAILABLE naming the folder; ``remember`` still makes its file durable."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_home / 'index.db'}{suffix}").unlink(missing_ok=True)
    (tmp_home / entry).mkdir()
    for args in (("recall", "kiln", "--store", "global"), ("doctor",)):
        proc = _coffer(tmp_home, *args)
        assert proc.returncode == 1
        assert "unexpected" not in proc.stderr
        assert proc.stderr.startswith("error: INDEX_UNAVAILABLE: ")
        assert f"{tmp_home / entry} is a folder, not a file" in proc.stderr
    with MemoryService(tmp_home) as svc, pytest.raises(IndexUnavailable):
        svc.recall("kiln", stores=["global"], mode="keyword")
    proc = _coffer(tmp_home, "remember", "The loom is oiled.", "--store", "global")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_home / "memory" / "global" / "knowledge" / "inbox" / "the-loom-is-oiled.md").is_file()


def test_a_dangling_link_in_place_of_the_index_is_a_typed_error(tmp_home: Path) -> None:
    """``index.db`` a symbolic link to a file that is not there (an index kept on a disk that is
    not mounted): every read died with a raw ``FileNotFoundError``."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp_home / 'index.db'}{suffix}").unlink(missing_ok=True)
    (tmp_home / "index.db").symlink_to(tmp_home / "nowhere" / "index.db")
    proc = _coffer(tmp_home, "recall", "kiln", "--store", "global")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: INDEX_UNAVAILABLE: "), proc.stderr
    assert f"(a symbolic link to {tmp_home / 'nowhere' / 'index.db'})" in proc.stderr


@pytest.mark.parametrize("blocked", ["locks", "locks/global.lock"])
def test_a_lock_that_cannot_be_made_keeps_reads_and_refuses_writes_typed(
    tmp_home: Path, blocked: str
) -> None:
    """A file named ``locks`` (or a folder named like a store's lock file): every command of the
    home, reads too, died with a raw ``NotADirectoryError`` (``IsADirectoryError``), the CLI's
    "unexpected". Reads now answer from the index as it stands; writes are STORAGE_NOT_WRITABLE
    naming the entry in the way, and write nothing."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    entry = tmp_home / blocked
    if blocked == "locks":
        shutil.rmtree(entry)
        entry.write_text("")
    else:
        entry.unlink()
        entry.mkdir()
    with MemoryService(tmp_home) as svc:
        assert _titles(svc, "kiln") == ["kiln"]
        assert [r.fact.title for r in svc.list_facts(store="global").items] == ["kiln"]
        with pytest.raises(StorageNotWritable) as refused:
            svc.remember("The loom is oiled.", title="loom", scope="global")
    assert refused.value.path == str(entry)
    assert not list((tmp_home / "memory" / "global" / "knowledge" / "inbox").glob("loom*"))
    proc = _coffer(tmp_home, "remember", "The loom is oiled.", "--store", "global")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: STORAGE_NOT_WRITABLE: cannot change {entry}: "), proc.stderr


@pytest.mark.parametrize("blocked", ["memory/global", "memory/global/knowledge/inbox"])
def test_a_file_in_place_of_a_store_folder_refuses_writes_typed(tmp_home: Path, blocked: str) -> None:
    """A file where a store's folder should be: ``remember`` died with a raw ``NotADirectoryError``
    naming a path below it. It is STORAGE_NOT_WRITABLE naming the file in the way."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    entry = tmp_home / blocked
    shutil.rmtree(entry)
    entry.write_text("")
    with MemoryService(tmp_home) as svc:
        with pytest.raises(StorageNotWritable) as refused:
            svc.remember("The loom is oiled.", title="loom", scope="global")
        assert svc.recall("loom", stores=["global"], mode="keyword").hits == ()
    assert refused.value.path == str(entry)
    assert entry.read_text() == ""


def _nest_past_path_max(folder: Path) -> Path:
    """Folders nested until the path is past PATH_MAX (4096 bytes), made through relative names."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        for _ in range(24):
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("deep.md", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as out:
            out.write("The walrus sleeps deep.\n")
    finally:
        os.close(fd)
    return folder / ("d" * 200)


def test_a_folder_nested_past_path_max_is_broken_not_the_store_down(tmp_home: Path) -> None:
    """A folder nested past PATH_MAX under a store (a sync tool's runaway copy, a hostile tree):
    every read of the store, keyword and grep, and ``coffer doctor`` died with a raw
    ``OSError: [Errno 36] File name too long``; for the global store, recall in every project.
    It is skipped: doctor lists it as broken, the store's other facts answer."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The walrus is fed at noon.", title="walrus", scope="global")
        knowledge = svc.targets.paths("global").knowledge
    top = _nest_past_path_max(knowledge)
    for _ in range(2):  # the first read scans the store; the second takes the small store's check
        for mode in ("keyword", "grep"):
            proc = _coffer(tmp_home, "recall", "walrus", "--store", "global", "--mode", mode, "--json")
            assert proc.returncode == 0, proc.stderr
            assert "walrus" in proc.stdout and "deep" not in proc.stdout
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 1 and "unexpected" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("broken:")]
    assert line.startswith(f"broken: {top}/") and line.endswith(
        "path is longer than the system allows: never indexed; move it up or shorten its names"
    )


def test_a_fifo_among_the_audit_segments_neither_hangs_nor_swallows_the_log(tmp_home: Path) -> None:
    """A FIFO named like the newest audit segment (``audit/events-2999….jsonl``): ``coffer audit``
    blocked for ever opening it, and every write appended its events into the pipe, where they
    were lost (each with a logged traceback: fsync of a FIFO fails). Only regular files are
    segments now."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    fifo = tmp_home / "audit" / "events-29990101T000000000000Z.jsonl"
    os.mkfifo(fifo)
    with MemoryService(tmp_home) as svc:
        svc.remember("The loom is oiled.", title="loom", scope="global")
    proc = _coffer(tmp_home, "audit", "--json", timeout=30)  # it hung
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('"memory_added"') == 2, proc.stdout
    assert "Traceback" not in proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_in_place_of_a_store_file_hangs_no_command(tmp_home: Path, tmp_path: Path) -> None:
    """A FIFO in place of a project store's ``store.json`` hung recall, resume, session-context
    and doctor for ever (each reads every store's identity); one in place of the store's version
    file (``locks/<store>.version``) hung ``facts list`` and ``remember``. Both are read without
    blocking now, as a regular file or not at all."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    with MemoryService(tmp_home) as svc:
        store = svc.remember("The kiln runs hot.", title="kiln", cwd=repo).store
        root = svc.targets.paths(store).root
    fifos = (root / "store.json", tmp_home / "locks" / f"{store}.version")
    for fifo in fifos:
        fifo.unlink()
        os.mkfifo(fifo)
    for args in (
        ["recall", "kiln"],
        ["resume"],
        ["session-context"],
        ["facts", "list"],
        ["remember", "The loom."],
    ):
        proc = _coffer(tmp_home, *args, timeout=30, cwd=repo)  # they hung
        assert proc.returncode == 0, (args, proc.stderr)
    assert "kiln" in _coffer(tmp_home, "recall", "kiln", "--store", store).stdout


def test_a_fifo_in_place_of_a_journal_day_is_refused_typed(tmp_home: Path, tmp_path: Path) -> None:
    """An append to a journal day that is a FIFO died with a raw ``IsADirectoryError`` (the CLI's
    "unexpected"); it is STORAGE_NOT_WRITABLE naming the file. A whole write (a handoff) puts a
    file in the FIFO's place, as it replaces a link."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)

    def coffer(*args: str) -> subprocess.CompletedProcess[str]:
        return _coffer(tmp_home, *args, timeout=30, cwd=repo)

    assert coffer("journal", "add", "The kiln was fired.").returncode == 0
    assert coffer("handoff", "save", "Glaze next.").returncode == 0
    [day] = tmp_home.glob("memory/projects/*/journal/*.md")
    [handoff] = tmp_home.glob("memory/projects/*/handoff/main.md")
    for path in (day, handoff):
        path.unlink()
        os.mkfifo(path)
    proc = coffer("journal", "add", "The loom was oiled.")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: STORAGE_NOT_WRITABLE: cannot change {day}: not a regular file")
    assert coffer("handoff", "save", "Weave next.").returncode == 0
    assert "Weave next." in handoff.read_text()


def test_a_store_folder_that_is_a_link_to_another_store_is_not_written_through(
    tmp_home: Path, tmp_path: Path
) -> None:
    """A project store's folder replaced by a symbolic link to another store's folder: a write
    from its repository went through the link, into the other store (its fact, and its
    ``store.json`` rewritten with this repository's root, so both stores then claimed one
    checkout). Only the folders below a store's root were checked for links; a root linked to
    another store's folder is refused too (one linked to a synced folder elsewhere still works)."""
    repos = [tmp_path / "kiln", tmp_path / "loom"]
    with MemoryService(tmp_home) as svc:
        for repo in repos:
            subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
            svc.remember(f"The {repo.name} is in order.", title=repo.name, cwd=repo)
        kiln, loom = (svc.resolve_scope(repo).store_dir for repo in repos)
    identity = (kiln / "store.json").read_bytes()
    moved = tmp_path / "loom-store"
    loom.rename(moved)
    loom.symlink_to(kiln)
    proc = _coffer(tmp_home, "remember", "The loom is oiled.", cwd=repos[1])
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: INVALID_INPUT: ") and "to another store's folder" in proc.stderr
    assert sorted(p.name for p in (kiln / "knowledge" / "inbox").iterdir()) == ["kiln.md"]
    assert (kiln / "store.json").read_bytes() == identity
    loom.unlink()
    moved.rename(tmp_path / "synced")
    loom.symlink_to(tmp_path / "synced")  # a folder a sync tool keeps, outside the home
    assert _coffer(tmp_home, "remember", "The loom is oiled.", cwd=repos[1]).returncode == 0
    assert len(list((tmp_path / "synced" / "knowledge" / "inbox").iterdir())) == 2

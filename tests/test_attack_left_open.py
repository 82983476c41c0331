"""What audit22's sweep found and left open (a tampered index, a config.toml that is no file, a
store folder linked to another store's, a bare repository), pinned: each test here failed before
its fix. Real homes, real files, FIFOs, links and git repositories, ``coffer`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from test_attack_home_entries import _coffer, _titles

from coffer_memory import InvalidInput, MemoryService, ScopeUnresolved

# Another program's hand in index.db: a table the schema makes virtual (FTS5) made a plain one
# (or a view), one of an FTS5 table's own tables dropped, a plain table dropped; with the table
# doctor then names.
TAMPER = {
    "words-plain": "DROP TABLE documents_words; CREATE TABLE documents_words (text, store, context)",
    "fts-plain": "DROP TABLE documents_fts; CREATE TABLE documents_fts (text, resource_name, chunk_id)",
    "words-view": "DROP TABLE documents_words; CREATE VIEW documents_words AS SELECT 1 AS text",
    "words-shadow": "DROP TABLE documents_words_idx",
    "kv-dropped": "DROP TABLE kv",
}
NAMED = {"fts-plain": "documents_fts", "words-shadow": "documents_words_idx", "kv-dropped": "kv"}


def _tamper(index: Path, how: str) -> None:
    conn = apsw.Connection(str(index))
    conn.execute("PRAGMA writable_schema=ON" if how == "words-shadow" else "SELECT 1")
    if how == "words-shadow":  # DROP of a shadow table is refused; the schema row is deleted instead
        conn.execute("DELETE FROM sqlite_master WHERE name = 'documents_words_idx'")
    else:
        conn.execute(TAMPER[how])
    conn.close()


@pytest.mark.parametrize("how", sorted(TAMPER))
@pytest.mark.parametrize("first", ["recall", "doctor"])
def test_a_tampered_index_schema_is_moved_aside_and_rebuilt(tmp_home: Path, how: str, first: str) -> None:
    """index.db whose word index (an FTS5 table) was replaced by a plain table: every keyword
    recall died with a raw ``SQLError: no such column: documents_words`` (the CLI's "unexpected"),
    and ``coffer doctor`` said ok. The schema's shape is checked when the file is opened: such a
    file is moved aside and rebuilt from the files, as a damaged one is, and doctor lists it."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    _tamper(tmp_home / "index.db", how)
    proc = _coffer(tmp_home, first, *(("kiln", "--store", "global") if first == "recall" else ()))
    assert proc.returncode == 0, proc.stderr
    assert "unexpected" not in proc.stderr and "rebuilding from the files" in proc.stderr
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("repaired: ")]
    assert NAMED.get(how, "documents_words") in line
    assert "moved to index.db.corrupt-" in line
    proc = _coffer(tmp_home, "recall", "kiln", "--store", "global")
    assert proc.returncode == 0 and "kiln" in proc.stdout, proc.stderr
    assert len(list(tmp_home.glob("index.db.corrupt-*[0-9]Z"))) == 1


def test_an_index_schema_tampered_under_a_running_service_is_rebuilt(tmp_home: Path) -> None:
    """The same change made by another program while a service holds the index open: the
    recall that meets it rebuilds the index from the files and answers (a statement's
    ``SQLError`` on a changed schema is INDEX_UNAVAILABLE saying so, never the raw error; the
    recall takes that as its cue to rebuild), and ``doctor`` lists the repair."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        assert _titles(svc, "kiln") == ["kiln"]
        _tamper(tmp_home / "index.db", "words-plain")
        assert _titles(svc, "kiln") == ["kiln"]
        svc.remember("The loom is oiled.", title="loom", scope="global")
        assert _titles(svc, "loom") == ["loom"]
        (repair,) = svc.doctor().index_repairs
        assert "documents_words is a plain table" in repair


def test_doctor_of_a_running_service_finds_a_tampered_schema(tmp_home: Path) -> None:
    """A service's ``doctor`` looks at the schema too, not only at the rows: a tampered word index
    nothing had read yet was reported ok."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        _tamper(tmp_home / "index.db", "words-plain")
        report = svc.doctor()
        (repair,) = report.index_repairs
        assert "documents_words" in repair and "moved to index.db.corrupt-" in repair
        assert _titles(svc, "kiln") == ["kiln"]


def _in_place_of(path: Path, kind: str) -> str:
    """Put a ``kind`` entry where ``path`` is; returns what the error calls it."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO"
    if kind == "folder":
        path.mkdir()
        return "a folder"
    path.symlink_to(path.parent / "nowhere" / path.name)
    return f"a symbolic link to {path.parent / 'nowhere' / path.name}, which is not there"


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling-link"])
def test_a_config_toml_that_is_no_file_is_refused_typed_not_ignored(
    tmp_home: Path, tmp_path: Path, kind: str
) -> None:
    """A ``config.toml`` that is a FIFO, a folder or a link to nothing was silently skipped: the
    home ran on defaults, whatever the user meant to set (a config.toml that is not valid TOML
    is INVALID_INPUT naming it). It is refused the same way, without opening a FIFO for good;
    ``coffer-hook`` (which reads ``[projects] exclude`` from it) stays silent at once, as for bad
    TOML, where a FIFO held each session start until the hook's deadline (3 s by default)."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
        svc.append_rule("always fire the kiln slowly", cwd=repo)
    cfg = tmp_home / "config.toml"
    what = _in_place_of(cfg, kind)
    for args in (("recall", "kiln", "--store", "global"), ("config", "set", "memory.default_mode", "grep")):
        proc = _coffer(tmp_home, *args, timeout=30)
        assert proc.returncode == 1, proc.stdout
        assert proc.stderr.startswith(f"error: INVALID_INPUT: {cfg} is {what}, not a file"), proc.stderr
    with pytest.raises(InvalidInput) as refused:
        MemoryService(tmp_home)
    assert refused.value.field == "config"
    hook = Path(sys.executable).with_name("coffer-hook")
    payload = json.dumps({"hook_event_name": "SessionStart", "cwd": str(repo), "session_id": "s-1"})
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "COFFER_HOOK_DEADLINE": "20"}
    run = [str(hook), "--agent", "claude-code"]
    proc = subprocess.run(run, input=payload, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "deadline exceeded" not in (tmp_home / "logs" / "hook.log").read_text()
    # Still there as it was: nothing wrote a file in its place (``config set`` refused too).
    mode = os.lstat(cfg).st_mode
    assert {"fifo": stat.S_ISFIFO, "folder": stat.S_ISDIR, "dangling-link": stat.S_ISLNK}[kind](mode)


@pytest.mark.parametrize("where", [".", "hooks"])
def test_a_bare_repository_is_named_as_one_not_as_no_repository(
    tmp_home: Path, tmp_path: Path, where: str
) -> None:
    """``coffer remember`` (or the journal, a handoff, ``facts list``) inside a bare repository
    (``git init --bare``) said "not inside a git repository" and hinted "run it inside a git
    repository": the user was in one. It says the repository is bare, with no checkout to keep a
    project's memory for, and how to get one; the hint offers the other stores only."""
    bare = tmp_path / "kiln.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    assert _coffer(tmp_home, "remember", "--global", "The kiln runs hot.", cwd=bare).returncode == 0
    for args in (("remember", "The kiln runs hot."), ("journal", "add", "Fired."), ("facts", "list")):
        proc = _coffer(tmp_home, *args, cwd=bare / where)
        assert proc.returncode == 1
        first, hint = proc.stderr.splitlines()
        assert first.startswith("error: SCOPE_UNRESOLVED: ") and "not inside a git repository" not in first
        assert f"{bare} is a bare git repository, with no checkout" in first
        assert f"git clone {bare}" in first and f"git -C {bare} worktree add" in first
        assert "run it inside a git repository" not in hint and "--store NAME" in hint
    with MemoryService(tmp_home) as svc, pytest.raises(ScopeUnresolved, match="bare git repository"):
        svc.remember("The kiln runs hot.", cwd=bare / where)
    clone = tmp_path / "kiln"
    subprocess.run(["git", "clone", "-q", str(bare), str(clone)], check=True, capture_output=True)
    assert _coffer(tmp_home, "remember", "The loom is oiled.", cwd=clone).returncode == 0


def test_a_store_folder_linked_to_another_store_is_not_read_through(tmp_home: Path, tmp_path: Path) -> None:
    """A project store's folder replaced by a symbolic link to another store's folder: writes
    from its repository were refused (INVALID_INPUT, audit22), but every read went through the
    link: recall, ``facts list``, ``get`` and the lanes from its repository answered with the other
    store's facts as its own, ``stores list`` counted them twice and ``doctor`` said ok. Reads of
    such a store are refused the same way (as a worktree whose main checkout moved is: answering
    from another store would be worse than no answer), its index rows are never read through the
    link, and doctor lists the link. A store folder linked outside the home (a sync tool's) reads
    as before."""
    repos = [tmp_path / "kiln", tmp_path / "loom"]
    with MemoryService(tmp_home) as svc:
        for repo in repos:
            subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
            svc.remember(f"The {repo.name} is in order.", title=repo.name, cwd=repo)
        kiln_fact = svc.list_facts(cwd=repos[0]).items[0].fact.id
        (kiln, kiln_store), (loom, loom_store) = (
            (t.store_dir, t.store) for t in (svc.target(cwd=r) for r in repos)
        )
    moved = tmp_path / "loom-store"
    loom.rename(moved)
    loom.symlink_to(kiln)
    for args in (
        ("recall", "in order"),
        ("facts", "list"),
        ("facts", "show", kiln_fact),
        ("journal",),
        ("resume",),
        ("recall", "in order", "--store", loom_store),
    ):
        proc = _coffer(tmp_home, *args, cwd=repos[1])
        assert proc.returncode == 1, (args, proc.stdout)
        assert proc.stderr.startswith("error: INVALID_INPUT: "), (args, proc.stderr)
        assert f"store {loom_store} is a symbolic link to another store's folder" in proc.stderr
        assert "kiln" not in proc.stdout
    with MemoryService(tmp_home) as svc:
        with pytest.raises(InvalidInput, match="another store's folder"):
            svc.get_fact(kiln_fact, store=loom_store)
        counts = {s.name: s.fact_count for s in svc.stores()}
        assert counts[kiln_store] == 1 and counts[loom_store] == 0
        roots = {s.name: str(s.project_root) for s in svc.stores()}  # not kiln's store.json, read through
        assert roots[loom_store] != str(repos[0])
        assert [h.title for h in svc.recall("in order", cwd=repos[0]).hits] == ["kiln"]
    proc = _coffer(tmp_home, "doctor")
    assert proc.returncode == 1
    assert f"symlink: {loom} (never followed)" in proc.stdout
    loom.unlink()
    moved.rename(tmp_path / "synced")
    loom.symlink_to(tmp_path / "synced")  # a folder a sync tool keeps, outside the home
    proc = _coffer(tmp_home, "recall", "in order", cwd=repos[1])
    assert proc.returncode == 0 and "loom" in proc.stdout and "kiln" not in proc.stdout, proc.stderr


def test_opens_and_a_long_lived_reader_survive_the_index_moved_aside_under_them(tmp_home: Path) -> None:
    """audit22 asked whether a repair moving index.db, -wal and -shm aside races the reopen of
    the file by the processes using it. It did, with real processes: a connection opened between
    the repair's renames failed with INDEX_UNAVAILABLE "disk I/O error (is the disk full...)"
    (SQLite's SQLITE_IOERR_FSTAT: its -shm renamed away as it opened it) or "No such file" (the
    new file renamed after its O_CREAT), and a long-lived service whose reopen failed so kept a
    closed connection: every recall after it was a raw ``ConnectionClosedError`` until restart.
    An open now holds the repair lock shared (a move-aside holds it alone), and a reopen that
    failed is tried again by the next call."""
    with MemoryService(tmp_home) as svc:
        for i in range(20):
            svc.remember(f"filler {i} " + "words " * 40, title=f"filler-{i}", scope="global")
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    helper = Path(__file__).with_name("_index_race.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    roles = ("recall", "open", "open", "repair")
    procs = [
        subprocess.Popen(
            [sys.executable, str(helper), role, str(tmp_home), "12"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # the repair's warning, once per round
            text=True,
            env=env,
        )
        for role in roles
    ]
    procs[-1].wait(timeout=120)
    (tmp_home.parent / "repairs-done").touch()  # the service's last recall, on a settled index
    lines = [p.communicate(timeout=120)[0].strip() for p in procs]
    seen = {}
    for role, line in zip(roles, lines, strict=True):
        name, rounds, errors = line.split(" ", 2)
        assert name == role
        seen.setdefault(role, []).append((int(rounds), json.loads(errors)))
    assert all(rounds > 0 and errors == {} for runs in seen.values() for rounds, errors in runs), seen

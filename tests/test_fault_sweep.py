"""What the fault sweep (bench/fault_sweep.py) found, pinned deterministically: each test here
failed before its fix. Real homes, real index files, real processes where a process matters.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coffer_memory import MemoryNotFound, MemoryService
from coffer_memory._config import Settings

ROOT = Path(__file__).resolve().parents[1]


def _child(code: str, *args: str) -> object:
    """Run ``code`` in a fresh Python process; what it printed as JSON (its exit status 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    return json.loads(proc.stdout)


def test_a_rebuild_by_another_process_never_hides_a_fact_from_a_running_reader(tmp_home: Path) -> None:
    """``reindex --rebuild`` dropped a store's rows and committed before indexing the files again:
    a long-lived process reading meanwhile (a server, coffer-mcp) answered MEMORY_NOT_FOUND for
    facts on disk and recalled nothing (bench/fault_sweep.py: a REST edit refused with 404 while
    the CLI rebuilt; with 300 facts two reads in three missed). A reader now sees the rows from
    before the rebuild until it commits.
    """
    # Every store counts as large and its full scan is never due: the reader answers from the
    # state it read last (what a server does between full scans).
    settings = Settings.load(tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=3600)
    seen: list[tuple[bool, bool]] = []
    with MemoryService(settings=settings) as reader, MemoryService(settings=settings) as rebuilder:
        ids = [
            reader.remember(f"Fact {i}: the kiln{i}q runs hot.", title=f"kiln {i}", scope="global").fact.id
            for i in range(6)
        ]
        for _ in range(2):  # the first read after its own writes scans; the next one keeps the state
            assert reader.recall("kiln3q", stores=["global"], mode="keyword").hits

        def during(store: str, done: int, total: int) -> None:
            if store != "global" or seen:
                return
            try:
                found = reader.get_fact(ids[3], store="global").fact.id == ids[3]
            except MemoryNotFound:
                found = False
            hits = [h.id for h in reader.recall("kiln3q", stores=["global"], mode="keyword").hits]
            seen.append((found, ids[3] in hits))

        rebuilder.reindex("global", rebuild=True, progress=during)
        assert seen == [(True, True)]
        assert [h.id for h in reader.recall("kiln3q", stores=["global"], mode="keyword").hits] == [ids[3]]
        assert not reader.doctor().index_mismatches


# A child that cannot grow any file past 2 KiB (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with
# EFBIG): a fact file fits, the index's write-ahead log (a 4 KiB page a frame) does not.
_FULL_INDEX_CHILD = r"""
import json, resource, signal, sys
from coffer_memory import CofferError, MemoryService

home, fact_id, other_id = sys.argv[1], sys.argv[2], sys.argv[3]
with MemoryService(home) as svc:
    _ = svc.db
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, resource.RLIM_INFINITY))
    out = {}
    for step, call in [
        ("recall", lambda: len(svc.recall("walnut", stores=["global"], mode="keyword").hits)),
        ("get", lambda: svc.get_fact(fact_id, store="global").fact.body),
        ("edit", lambda: svc.edit_fact(fact_id, body="The pecan tray is red.", store="global").receipt.index_pending),
        ("delete", lambda: svc.delete_fact(other_id, store="global").receipt.index_pending),
    ]:
        try:
            out[step] = ["ok", call()]
        except CofferError as exc:
            out[step] = ["typed", exc.code]
        except Exception as exc:
            out[step] = ["raw", type(exc).__name__]
print(json.dumps(out))
"""


def test_an_index_that_cannot_grow_never_fails_a_read_or_an_edit_with_a_raw_error(tmp_home: Path) -> None:
    """The reconcile a read runs first wrote to a full index and its apsw IOError ended the read,
    and ``edit_fact`` (which reconciles before it finds the file): a disk full for the derived
    index only is no reason to refuse the truth. Reads answer from the index as it stands; the
    edit and the delete are made, their receipts saying the index is pending (the delete's file
    was gone and the caller was told it failed); once there is room all agrees again."""
    with MemoryService(tmp_home) as svc:
        fact = svc.remember("The walnut tray is blue.", title="tray", scope="global").fact
        other = svc.remember("The hazel jar is empty.", title="jar", scope="global").fact
        path = svc.get_fact(fact.id, store="global").path
    # An edit made outside coffer: the next read has something to write to the index.
    path.write_text(path.read_text().replace("walnut tray is blue", "walnut tray is green"))
    got = _child(_FULL_INDEX_CHILD, str(tmp_home), fact.id, other.id)
    assert isinstance(got, dict)
    assert got["recall"] == ["ok", 1]
    assert got["get"] == ["ok", "The walnut tray is green."]
    assert got["edit"] == ["ok", True]
    assert got["delete"] == ["ok", True]
    with MemoryService(tmp_home) as svc:
        assert svc.get_fact(fact.id, store="global").fact.body == "The pecan tray is red."
        assert [h.id for h in svc.recall("pecan", stores=["global"], mode="keyword").hits] == [fact.id]
        assert not svc.recall("walnut", stores=["global"], mode="keyword").hits
        assert not svc.recall("hazel", stores=["global"], mode="keyword").hits
        with pytest.raises(MemoryNotFound):
            svc.get_fact(other.id, store="global")
        report = svc.doctor()
        assert not report.index_mismatches and not report.broken


_CLAIMING_CHILD = r"""
import sys, time
from pathlib import Path
from coffer_memory._transcripts.ledger import Ledger

ledger = Ledger(Path(sys.argv[1]))
print(ledger.claim("claude-code", "s1", "sha-a"), flush=True)
time.sleep(60)
"""


def test_a_distil_claim_of_a_killed_process_is_taken_over_at_once(tmp_path: Path) -> None:
    """A SessionEnd distil killed mid-way (SIGKILL, OOM, the machine's shutdown) left its claim
    'running': every later end of that session answered ``in_progress`` and the sweep skipped it
    for ten minutes. A claim whose process, on this machine, is gone is taken over at once; a live
    one still holds the session."""
    from coffer_memory._transcripts.ledger import Ledger

    path = tmp_path / "ledger.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", _CLAIMING_CHILD, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "True\n"
        ledger = Ledger(path)
        assert not ledger.claim("claude-code", "s1", "sha-b")  # its process runs: the claim holds
    finally:
        child.kill()
        child.wait()
    assert ledger.claim("claude-code", "s1", "sha-b")
    ledger.close()


def test_a_grep_walk_that_ends_after_close_keeps_nothing(tmp_path: Path) -> None:
    """A service closed while another thread's grep recall walked its store: the walk's end
    asserted the inotify feed was still there and the recall died with a bare AssertionError.
    It now keeps nothing (no feed vouches for it) and the next search walks again."""
    from coffer_memory.plugins.builtin._grep_texts import Watched

    parent = tmp_path / "store"
    (parent / "knowledge").mkdir(parents=True)
    (parent / "knowledge" / "a.md").write_text("hello\n")
    watched = Watched(forget=lambda path: None, arm_after=1)
    epoch = watched.start(str(parent), ["knowledge"])
    assert epoch is not None
    watched.close()
    watched.finish(str(parent), {"knowledge": {str(parent / "knowledge" / "a.md")}}, epoch)
    assert watched.listing(str(parent), ["knowledge"]) is None


# 120 facts written by one service; a second reads them as a server does between full scans.
_HERONS = r"""
import json, os, pathlib, sys, threading, time
from coffer_memory import MemoryService
from coffer_memory._config import Settings
from coffer_memory._store.lock import store_lock
from coffer_memory._store.paths import lock_path

home = sys.argv[1]
with MemoryService(home) as svc:
    for i in range(120):
        svc.remember(f"Fact {i}: the heron{i}q nests by the weir. " + "reed " * 80, title=f"h{i}", scope="global")
# The first service checkpointed its log into index.db on close. This one reads as a server does
# between full scans (every store counts as large: a read trusts the state it read last).
settings = Settings.load(home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=3600)
answers = []
with MemoryService(settings=settings) as svc:
    for _ in range(2):
        assert svc.recall("heron7q", stores=["global"], mode="keyword").hits
"""

_TRUNCATING_CHILD = (
    _HERONS
    + r"""
    with open(os.path.join(home, "index.db"), "r+b") as f:  # another program cuts the file short
        f.truncate(8192)
    hits = [h.title for mode in ("grep", "keyword") for h in svc.recall("heron7q", stores=["global"], mode=mode).hits]
    added = svc.remember("The egret nests by the mill.", title="egret", scope="global").fact.id
    found = [h.id for h in svc.recall("egret", stores=["global"], mode="keyword").hits] == [added]
    print(json.dumps({"hits": hits, "found": found, "repairs": len(svc.doctor().index_repairs)}))
"""
)


def test_an_index_cut_short_under_a_running_process_is_rebuilt_not_a_crash(tmp_home: Path) -> None:
    """index.db is memory-mapped: truncated by another program (a backup restore, ``cp`` over
    it, a sync tool) while a server ran, the server's next read touched a page past the new end
    and the process died of SIGBUS (coffer-api exited -7 on the next request, taking every client
    with it). A file that shrank under the process is now taken for damage before a read: moved
    aside and rebuilt from the files before the read answers (a grep recall answered nothing
    while the state kept from before the damage said the store was indexed)."""
    assert _child(_TRUNCATING_CHILD, str(tmp_home)) == {"hits": ["h7", "h7"], "found": True, "repairs": 1}


_CUT_BESIDE_SCAN_CHILD = (
    _HERONS
    + r"""
    # A background full scan of the store holds the service lock, waiting for the store's file lock.
    with store_lock(lock_path(pathlib.Path(home), "global")):
        svc.index.reconciler._scan_in_background("global")
        deadline = time.monotonic() + 60
        while svc.index.lock.acquire(blocking=False):
            svc.index.lock.release()
            assert time.monotonic() < deadline
            time.sleep(0.001)
        with open(os.path.join(home, "index.db"), "r+b") as f:  # another program cuts the file short
            f.truncate(8192)
        reader = threading.Thread(
            target=lambda: answers.append(
                [h.title for h in svc.recall("heron7q", stores=["global"], mode="keyword").hits]
            )
        )
        reader.start()
        reader.join(1.0)  # a read that trusted the scan answers at once, from the cut file
    reader.join(60)
    print(json.dumps({"hits": answers, "repairs": len(svc.doctor().index_repairs)}))
"""
)


def test_an_index_cut_short_during_a_background_scan_is_repaired_before_a_read_answers(
    tmp_home: Path,
) -> None:
    """A read that comes while a background full scan holds the lock reads the last committed
    rows when nothing changed, without waiting for the scan. It skipped the index file's own check
    too: cut short by another program meanwhile (the scan found it so, moved it aside and began a
    new one), the read answered from the new, still empty index with no hits (found by kw19, when
    scans began earlier). A read now waits for the lock when the index holds no state of the
    scanned store yet, or when it finds the file damaged itself."""
    assert _child(_CUT_BESIDE_SCAN_CHILD, str(tmp_home)) == {"hits": [["h7"]], "repairs": 1}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the inotify feed is Linux only")
def test_a_fact_replaced_by_a_folder_of_its_name_leaves_no_row_behind(tmp_home: Path) -> None:
    """``knowledge/inbox/x.md`` deleted and a folder ``x.md/`` made in its place while the inotify
    feed vouched for the store: the feed named both, the file's news was dropped as lying under
    the new folder, and the folder's scan looked only below it. The file's row stayed: keyword
    recall served its text (no file holds it) until the next full scan, and doctor reported the
    mismatch. The other way round, the new file was not indexed until then."""
    settings = Settings.load(
        tmp_home,
        reconcile_full_scan_max_files=2,
        reconcile_full_scan_seconds=3600,
        reconcile_watch_full_scan_seconds=3600,
    )
    with MemoryService(settings=settings) as svc:
        paths = [
            svc.remember(f"Fact {i}: the ibis{i}q wades.", title=f"i{i}", scope="global").path
            for i in range(4)
        ]
        svc.recall("anything", stores=["global"])
        svc.reindex("global")  # a full scan of a store known to be large arms the feed
        feed = svc.index.reconciler.feed
        assert feed is not None and feed.status("global") == "verified"
        paths[2].unlink()
        paths[2].mkdir()
        (paths[2] / "inner.md").write_text("The ibis2q roosts inside.\n")
        assert [h.title for h in svc.recall("ibis2q", stores=["global"], mode="keyword").hits] == ["inner"]
        assert not svc.store_admin.doctor().index_mismatches
        # And back: the folder goes, a file takes its name (its news was dropped the same way).
        shutil.rmtree(paths[2])
        paths[2].write_text("The ibis2q flies off.\n")
        hits = svc.recall("ibis2q", stores=["global"], mode="keyword").hits
        assert [h.text for h in hits] == ["The ibis2q flies off."]
        assert not svc.store_admin.doctor().index_mismatches


_NO_ROOM_CHILD = r"""
import json, resource, signal, sys
from coffer_memory import CofferError, MemoryService

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.RLIM_INFINITY))
try:
    with MemoryService(sys.argv[1]) as svc:
        svc.recall("kiln", stores=["global"], mode="keyword")
    print(json.dumps(["ok"]))
except CofferError as exc:
    print(json.dumps(["typed", exc.code]))
except Exception as exc:
    print(json.dumps(["raw", type(exc).__name__]))
"""


def test_an_index_that_cannot_be_opened_for_want_of_room_is_a_typed_error(tmp_home: Path) -> None:
    """Opening the index needs room (its shared-memory file is 32 KiB): under a small file size
    limit (``ulimit -f 8``) or on a full disk every command failed with a raw apsw IOError, which
    the CLI printed as 'unexpected IOError'. It is INDEX_UNAVAILABLE, naming the file."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    assert _child(_NO_ROOM_CHILD, str(tmp_home)) == ["typed", "INDEX_UNAVAILABLE"]


def test_the_cli_prints_no_traceback_when_a_write_leaves_the_index_pending(tmp_home: Path) -> None:
    """Under a small file size limit (``ulimit -f 8``: index.db cannot be opened) ``coffer
    remember`` made the fact durable and said so, with exit 0, and then printed the indexing
    warning's whole traceback on stderr (Python's last-resort log handler). A warning is one line."""
    with MemoryService(tmp_home) as svc:
        svc.remember("The kiln runs hot.", title="kiln", scope="global")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COFFER_HOME": str(tmp_home)}
    command = (
        f"ulimit -f 8; exec {sys.executable} -m coffer_memory remember 'The loom is oiled.' --store global"
    )
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the next read indexes it" in proc.stderr
    with MemoryService(tmp_home) as svc:
        assert [h.title for h in svc.recall("loom", stores=["global"], mode="keyword").hits] == [
            "The loom is oiled."
        ]


def test_an_index_another_process_replaced_with_a_smaller_one_is_not_taken_for_cut_short(
    tmp_home: Path,
) -> None:
    """The size check counts per file (inode): another process moving a damaged index aside and
    building a small new one must not look, to this process's next connection, like the big
    file it knew cut short (a spurious repair would move the good new index aside)."""
    with MemoryService(tmp_home) as big:
        for i in range(60):
            big.remember(f"Fact {i}: the marten{i}q hunts. " + "pine " * 60, title=f"m{i}", scope="global")
    with MemoryService(tmp_home) as big:  # this process has seen the big file whole
        assert big.recall("marten3q", stores=["global"], mode="keyword").hits
    # Another process replaces the file with a new, smaller index (as its repair would).
    with MemoryService(settings=Settings.load(tmp_home / "elsewhere")) as other:
        other.remember("One fact.", title="one", scope="global")
    os.replace(tmp_home / "elsewhere" / "index.db", tmp_home / "index.db")
    with MemoryService(tmp_home) as later:  # a new connection of this process
        assert later.recall("marten3q", stores=["global"], mode="keyword").hits
        assert not later.doctor().index_repairs


def test_an_index_deleted_and_rebuilt_in_one_process_is_not_taken_for_cut_short(tmp_home: Path) -> None:
    """``rm index.db`` and a rebuild, in one long-lived process: the file system may give the new
    file the old one's freed inode, and the size check took the small new file for the big old
    one cut short. The rebuild then moved its own new index aside as damaged and built it again
    (three times in three of ``bench/limit.py``'s cold rebuilds at 10k)."""
    with MemoryService(tmp_home) as svc:
        for i in range(60):
            svc.remember(f"Fact {i}: the marten{i}q hunts. " + "pine " * 60, title=f"m{i}", scope="global")
    index = tmp_home / "index.db"
    reused = 0
    for _ in range(6):
        old = index.stat().st_ino
        for suffix in ("", "-wal", "-shm"):
            Path(f"{index}{suffix}").unlink(missing_ok=True)
        with MemoryService(tmp_home) as fresh:
            fresh.reindex()
            reused += index.stat().st_ino == old
            assert fresh.recall("marten3q", stores=["global"], mode="keyword").hits
            assert not fresh.doctor().index_repairs
        assert not list(tmp_home.glob("index.db.corrupt-*"))
    if not reused:  # then the case cannot arise here
        pytest.skip("this file system never gave the new index.db its predecessor's inode")


def test_a_clock_set_back_does_not_stop_the_full_scan_of_a_large_store(tmp_home: Path) -> None:
    """A process whose clock ran ahead (a machine booted with a wrong clock that NTP then set
    back, or a clock set back by hand) recorded its last full scan of a store in the future. The
    scan was due only once the clock caught up again: a large store (over
    ``reconcile_full_scan_max_files``) missed every edit made in place (its folder's mtime does
    not move) for as long as the clock had been ahead. A scan dated in the future is now due."""
    import time

    # Every store counts as large; its full scan is due at each read (0 s), unless dated ahead.
    settings = Settings.load(
        tmp_home, reconcile_full_scan_max_files=0, reconcile_full_scan_seconds=0.0, reconcile_watch=False
    )
    with MemoryService(settings=settings) as svc:
        ids = [
            svc.remember(f"Fact {i}: the lark{i}q sings.", title=f"l{i}", scope="global").fact.id
            for i in range(3)
        ]
        svc.reindex("global")
        # What a process with its clock an hour ahead wrote at its last full scan.
        svc.db.conn.execute(
            "UPDATE store_state SET last_full_scan = ? WHERE resource_name = 'global'", (time.time() + 3600,)
        )
        path = svc.get_fact(ids[1], store="global").path
        folder_mtime = path.parent.stat().st_mtime_ns
        path.write_text(path.read_text().replace("lark1q sings", "lark1q is silent"))
        assert path.parent.stat().st_mtime_ns == folder_mtime  # an edit in place
        deadline = time.monotonic() + 30  # a due scan may run beside the reads: a bound, not a timing
        while not (hits := svc.recall("silent", stores=["global"], mode="keyword").hits):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [h.id for h in hits] == [ids[1]]


_UNWRITABLE_CHILD = r"""
import glob, json, os, sys, tempfile
from coffer_memory import CofferError, MemoryService

home, fact_id = sys.argv[1], sys.argv[2]
out = {}
with MemoryService(home) as svc:
    for step, call in [
        ("recall", lambda: [h.id for h in svc.recall("kiln", stores=["global"], mode="keyword").hits]),
        ("grep", lambda: [h.id for h in svc.recall("kiln", stores=["global"], mode="grep").hits]),
        ("list", lambda: [r.fact.id for r in svc.list_facts(store="global").items]),
        ("get", lambda: svc.get_fact(fact_id, store="global").fact.id),
        ("doctor", lambda: [str(b) for b in svc.doctor().broken]),
        ("remember", lambda: svc.remember("The loom is oiled.", title="loom", scope="global").fact.id),
        ("edit", lambda: svc.edit_fact(fact_id, body="The kiln is cold.", store="global").fact.id),
        ("delete", lambda: svc.delete_fact(fact_id, store="global").fact.id),
    ]:
        try:
            out[step] = ["ok", call()]
        except CofferError as exc:
            out[step] = ["typed", exc.code, exc.details.get("path", "")]
        except Exception as exc:
            out[step] = ["raw", type(exc).__name__]
out["left"] = glob.glob(os.path.join(tempfile.gettempdir(), "coffer-index-*"))
print(json.dumps(out))
"""


def _as_another_user(tmp_path: Path) -> tuple[Path, list[str]]:
    """A folder for a home and the command prefix that runs a child as a user without root's
    power over permissions (root reads and writes any file whatever its mode)."""
    if os.geteuid() != 0:
        return tmp_path, []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tried")
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    # An interpreter under a folder only root may read (pyenv's libpython under /root, say)
    # cannot start as that user at all: that is the machine's setup, not coffer's answer.
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import coffer_memory"],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"this interpreter does not start as another user: {probe.stderr.strip()[:200]}")
    base = Path(tempfile.mkdtemp(prefix="coffer-perm-"))  # tmp_path's parents are root's alone
    os.chown(base, 65534, 65534)
    return base, prefix


_SEED_CHILD = r"""
import sys
from coffer_memory import MemoryService
with MemoryService(sys.argv[1]) as s:
    print(s.remember('The kiln runs hot.', title='kiln', scope='global').fact.id)
"""


@contextlib.contextmanager
def _unwritable(tmp_path: Path, frozen: str) -> Iterator[tuple[Path, str, Any, list[str]]]:
    """A home with one fact (``kiln``) made by another user than root, whose folder ``frozen``
    (``memory`` or the home itself, ``.``) and those below it are then made read-only; every
    step run on it as that user: the home, the fact's id, each step's outcome and the home's
    entries before. Everything is made writable again and removed afterwards."""
    base, who = _as_another_user(tmp_path)
    try:
        home = base / "home"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(base), "TMPDIR": str(base)}
        run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=120)
        made = run([*who, sys.executable, "-c", _SEED_CHILD, str(home)], check=True)
        fact_id = made.stdout.strip()
        before = sorted(str(p) for p in home.rglob("*"))
        for folder, _, _ in os.walk(home / frozen):
            os.chmod(folder, 0o555)
        proc = run([*who, sys.executable, "-c", _UNWRITABLE_CHILD, str(home), fact_id])
        assert proc.returncode == 0, proc.stderr[-2000:]
        yield home, fact_id, {**json.loads(proc.stdout), "stderr": proc.stderr}, before
    finally:
        for folder, _, _ in os.walk(base):
            os.chmod(folder, 0o755)
        if who:
            shutil.rmtree(base)


def test_a_store_folder_the_process_may_not_write_is_read_and_refuses_writes_typed(tmp_path: Path) -> None:
    """A store whose folders this process may not write (a home restored with other owners, a
    read-only bind mount of ``memory/``): reads answered, but ``remember`` died with a raw
    PermissionError from its temp file (the CLI: 'unexpected PermissionError'), and so did edits
    and deletes. Each is now STORAGE_NOT_WRITABLE naming the folder, and nothing is written."""
    with _unwritable(tmp_path, "memory") as (home, fact_id, got, before):
        assert got["recall"] == ["ok", [fact_id]] and got["grep"] == ["ok", [fact_id]]
        assert got["get"] == ["ok", fact_id]
        inbox = str(home / "memory" / "global" / "knowledge" / "inbox")
        for step in ("remember", "edit", "delete"):  # the folder, or the file it could not remove
            assert got[step][:2] == ["typed", "STORAGE_NOT_WRITABLE"], (step, got[step])
            assert got[step][2].startswith(inbox), (step, got[step])
        assert sorted(str(p) for p in home.rglob("*")) == before


def test_a_home_the_process_may_not_write_is_still_read(tmp_path: Path) -> None:
    """A home this process may read but not write (another user's, a read-only mount, a backup
    restored read-only) was refused whole: every command, recall included, failed with
    INVALID_INPUT 'not writable by this user'. Its memory is now read through a private index
    (built from the files, removed at close); writes are STORAGE_NOT_WRITABLE."""
    with _unwritable(tmp_path, ".") as (home, fact_id, got, before):
        assert got["recall"] == ["ok", [fact_id]] and got["grep"] == ["ok", [fact_id]]
        assert got["list"] == ["ok", [fact_id]] and got["get"] == ["ok", fact_id]
        assert got["doctor"] == ["ok", []]
        for step in ("remember", "edit", "delete"):
            assert got[step][:2] == ["typed", "STORAGE_NOT_WRITABLE"], (step, got[step])
        assert got["left"] == []  # the private index went with the service
        assert "not writable by this process" in got["stderr"]
        assert sorted(str(p) for p in home.rglob("*")) == before
